"""Locate: from a model query to the registry entry, its file and class, with evidence."""
