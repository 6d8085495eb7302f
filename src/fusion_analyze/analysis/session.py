"""One analysis session: the opened trees, the module index over them and the resolver."""

from __future__ import annotations

import os
import pickle
import signal
import sys
from dataclasses import dataclass, field

from ..index.modules import ModuleIndex
from ..locate.resolve import Resolver
from ..semantics.for_backend import binding_decider
from ..sources.trees import SourceTree, open_tree


def backend_for(backend: str | None, ascend: SourceTree | None) -> str:
    """The backend asked for, else Ascend when there is a vllm-ascend tree."""
    return backend or ("ascend" if ascend is not None else "cuda")


def warn_pair(session: "Session", no_ascend: bool = True) -> None:
    """Warnings on stderr where the answer is not what the user may think (the CLI says them once the answer
    exists, so that bad input stays one line): no vllm-ascend tree (the report is CUDA only), or a vllm-ascend tree
    that declares another vLLM release than the vLLM tree's."""
    from ..errors import note, warn
    from ..ir.texts import say
    from ..sources.trees import pair_mismatch

    vllm, ascend = session.vllm, session.ascend
    unknown = say("tree_version_unknown")
    trees = say("note_tree", name="vLLM", version=vllm.version or unknown, root=str(vllm.root))
    if ascend:
        trees = say("note_trees", first=trees, name="vllm-ascend", version=ascend.version or unknown,
                    root=str(ascend.root))
    note(trees, level=2)
    if ascend is None and no_ascend:
        warn(say("warn_no_ascend"))
    mismatch = pair_mismatch(vllm, ascend)
    if mismatch:
        warn(mismatch)


def _counts(index: ModuleIndex) -> list[int]:
    return [index.parse_count, index.cache.hits if index.cache is not None else 0]


@dataclass
class Session:
    vllm: SourceTree
    ascend: SourceTree | None
    backend: str
    index: ModuleIndex
    resolver: Resolver
    patterns: list = field(default_factory=list)
    _passes: tuple | None = None
    _reading: tuple | None = None  # (pid, pipe) of the child reading the passes
    _helper: int | None = None  # that child's pid while it goes on with idle-time work (start_passes `then`)
    shared_errors: set | None = None  # unreadable files met while reading what every model reads
    _hf: dict = field(default_factory=dict)  # --hf-root argument -> transformers tree (or None)

    def hf_tree(self, arg: str | None) -> SourceTree | None:
        """The transformers tree for configuration defaults: --hf-root (a path or transformers==X), else the
        installed transformers package (found, not imported), else none (the defaults are unknown)."""
        if arg not in self._hf:
            self._hf[arg] = open_tree(arg, "transformers", required=arg is not None)
        return self._hf[arg]

    def start_passes(self, then=None) -> None:
        """Read the graph passes in a forked child while this process goes on (the walk of one model costs
        about as much as the passes, and the machine has two cores). passes() collects them; where there is
        no fork, or the child fails, passes() reads them itself, with the same result. `then(session,
        stopped)`: what the child does next, on its own, until stop_helper() (`stopped()` turns true; it
        must return soon after)."""
        if self._passes is not None or self._reading is not None or not sys.platform.startswith("linux"):
            return
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: read, send (passes, unreadable files met, counts), store what it parsed, exit
            try:
                stop: list = []
                if then is not None:  # before anything is stored: a stop never cuts an entry in half
                    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
                os.close(r)
                index = self.index
                counts = _counts(index)
                passes = self._read_passes()
                met = {rel: index.errors[rel] for rel in index.touched if rel in index.errors}
                counts = [b - a for a, b in zip(counts, _counts(index))]
                data = pickle.dumps((passes, met, counts), protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(w, "wb") as f:
                    f.write(data)
                index.save_lines()
                if then is not None:
                    then(self, lambda: bool(stop))
            finally:
                os._exit(0)  # no atexit handlers, no flush of buffers the parent owns
        os.close(w)
        self._reading = (pid, r)
        self._helper = pid if then is not None else None

    def stop_helper(self) -> None:
        """Stop the passes' child's `then` work (it stops between two steps) and reap it."""
        if self._helper is not None and self._reading is None:
            pid, self._helper = self._helper, None
            try:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
            except OSError:
                pass

    def stop_passes(self) -> None:
        """Abandon a child still reading (the analysis failed before it needed the passes)."""
        if self._reading is not None:
            pid, r = self._reading
            self._reading = self._helper = None
            os.close(r)
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except OSError:
                pass
        self.stop_helper()

    def passes(self) -> tuple[list, list]:
        """The Ascend and CUDA graph passes of the trees, read once per session."""
        if self._passes is None and self._reading is not None:
            pid, r = self._reading
            self._reading = None
            with os.fdopen(r, "rb") as f:
                data = f.read()
            if pid != self._helper:  # a helper goes on: stop_helper() reaps it
                os.waitpid(pid, 0)
            try:
                self._passes, met, (parsed, hits) = pickle.loads(data)
            except Exception:  # noqa: BLE001 - the child died: read them here
                self._passes = None
            else:
                self.index.parse_count += parsed  # the counts say what this analysis parsed, wherever
                if self.index.cache is not None:
                    self.index.cache.hits += hits
                self.index.errors.update(met)
                self.index.touched.update(met)
                if self.shared_errors is not None:
                    self.shared_errors.update(met)
        if self._passes is None:
            self._passes = self._read_passes()
        return self._passes

    def _read_passes(self) -> tuple[list, list]:
        from ..passes.cuda_passes import read_cuda_passes
        from ..passes.ascend_passes import read_ascend_passes

        return read_ascend_passes(self.index), read_cuda_passes(self.index)

    @classmethod
    def open(cls, vllm_root: str | None, ascend_root: str | None, backend: str | None = None,
             patterns_dir: str | None = None, cache: bool = True, read_passes: bool = False,
             then=None) -> "Session":
        """`read_passes`: start reading the graph passes in a child at once (see start_passes), for a
        session that will analyze a model; the registry and patterns are read meanwhile."""
        vllm = open_tree(vllm_root, "vllm", required=True)
        ascend = open_tree(ascend_root, "vllm_ascend", required=False)
        backend = backend_for(backend, ascend)
        from ..index.parse_cache import default_cache
        from ..match.patterns import load_patterns

        index = ModuleIndex([vllm, ascend], backend=backend, cache=default_cache() if cache else None,
                            decider=binding_decider)
        session = cls(vllm, ascend, backend, index, None)  # type: ignore[arg-type]
        if read_passes:
            session.start_passes(then)
        try:
            session.resolver = Resolver(index)
            session.patterns = load_patterns(patterns_dir)
        except BaseException:
            session.stop_passes()
            raise
        return session
