"""An invoke task whose flags come from the options table (cleanbuild.cli.options), inside the error boundary.

A task is written as `fn(c, request, <its own parameters>)` and names the common options it takes; the task invoke
sees has a signature made here (invoke reads `inspect.signature`, so `__signature__` is set on the wrapper): the
task's own positionals, then each common option with the default that lets the cascade run (None; False for a
switch), then the task's own flags, then --debug. Each flag's help is the table's (SWITCHES for --json, --dry-run,
--debug) unless the task words it for itself. The common options are resolved into one Request
(cleanbuild.cli.settings.resolve, with invoke.yaml's `cleanbuild:` section) and handed to fn as `request`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from inspect import Parameter
from typing import Any

import invoke
from invoke import Exit

from cleanbuild.cli.options import BY_NAME, SWITCHES
from cleanbuild.cli.settings import resolve
from cleanbuild.core import boundary

# One meaning per short flag across every task: none are generated (invoke's automatic ones gave -d three
# meanings and ca_bundle a nameless "--" flag).
_task = functools.partial(invoke.task, auto_shortflags=False)
# What invoke runs: the guarded wrapper around a task function (which returns None or its own exit code).
Guarded = Callable[..., None]


def cli_task(*, common: tuple[str, ...] = (), positional: tuple[str, ...] = (), matrix: bool = False,
             iterable: tuple[str, ...] = (),
             **help_: str) -> Callable[[Callable[..., int | None]], invoke.Task[Guarded]]:
    """common: the options of the table this task takes (resolved into `request`); positional: those of them the
    task takes as positional arguments; matrix: --arch may list several archs; iterable: the task's own repeatable
    flags; help_: the task's own flags' help, or its own wording of a common one."""
    unknown = [n for n in (*common, *positional) if n not in BY_NAME]
    if unknown:
        raise TypeError(f"not options of cleanbuild.cli.options: {unknown}")

    def wrap(fn: Callable[..., int | None]) -> invoke.Task[Guarded]:
        own = list(inspect.signature(fn).parameters.values())[1:]
        wants_request = bool(own) and own[0].name == "request"
        own = own[1:] if wants_request else own
        sig = _signature([p for p in own if p.default is Parameter.empty], positional,
                         [n for n in common if n not in positional], [p for p in own if p.default is not Parameter.empty])
        names = [n for n in sig.parameters if n != "c"]
        helps = {n.rstrip("_"): help_.get(n.rstrip("_")) or (BY_NAME[n].help if n in BY_NAME else SWITCHES.get(n, ""))
                 for n in names}  # invoke names a flag without the trailing _ of a parameter (open_ -> --open)
        repeat = [n for n in names if n in iterable or (n in BY_NAME and BY_NAME[n].repeatable)]
        wrapper = _guarded(fn, sig, {p.name for p in own}, {*common, *positional} if wants_request else None, matrix)
        made: invoke.Task[Guarded] = _task(iterable=repeat, help=helps)(wrapper)  # invoke.task is typed `-> Callable`
        return made

    return wrap


def _signature(own_positional: list[Parameter], positional: tuple[str, ...], common: list[str],
               own_flags: list[Parameter]) -> inspect.Signature:
    """c, the positionals (the task's own, then common ones), the common flags, the task's own flags, --debug."""
    kind = Parameter.POSITIONAL_OR_KEYWORD
    params = [Parameter("c", kind), *[p.replace(kind=kind) for p in own_positional]]
    params += [Parameter(n, kind) for n in positional]
    params += [Parameter(n, kind, default=BY_NAME[n].parameter_default()) for n in common]
    params += [p.replace(kind=kind) for p in own_flags if p.name != "debug"]
    return inspect.Signature([*params, Parameter("debug", kind, default=False)])


def _guarded(fn: Callable[..., int | None], sig: inspect.Signature, own: set[str], shared: set[str] | None,
             matrix: bool) -> Guarded:
    """The task body invoke calls: the request resolved and fn run inside the error boundary (cleanbuild.core.boundary):
    one line and README's exit code instead of a traceback (unless --debug)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        values = sig.bind(*args, **kwargs)
        values.apply_defaults()
        given = dict(values.arguments)
        c, debug = given.pop("c"), bool(given.pop("debug"))

        def body() -> Any:
            call = {k: v for k, v in given.items() if k in own}
            if shared is not None:
                flags = {k: v for k, v in given.items() if k in shared}
                call["request"] = resolve(flags, c.config.get("cleanbuild"), matrix=matrix)
            return fn(c, **call)

        failed: list[str] = []
        result = boundary.guarded(body, debug=debug, report=lambda error: failed.append(f"error: {error}"))
        if failed:
            raise Exit(failed[0], code=result)
        if isinstance(result, int) and result:  # pins, lock, audit, validate: their own code, their lines printed
            raise Exit(code=result)

    wrapper.__signature__ = sig  # type: ignore[attr-defined]
    return wrapper
