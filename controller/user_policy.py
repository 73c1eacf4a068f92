"""Finding a user's ``module:function`` routing policy (pure): beside the scenario file that
names it, then in the working folder (as ``python -m`` would), then on the Python path, so
neither ``PYTHONPATH=.`` nor ``sudo env PYTHONPATH=.`` is needed; and the folder a module
came from, which a process of its own (the emulation's controller) is handed to import it.
"""
from __future__ import annotations

import importlib
import os
import sys
from importlib.machinery import PathFinder
from typing import Callable, Sequence

from topologies.fabric import FabricError


def module_folder(module_name: str) -> str | None:
    """The folder a loaded module's top-level package or module was imported from: the one
    to put on another process's path for it to import the same (None if not from a file)."""
    top = sys.modules.get(module_name.partition(".")[0])
    path = getattr(top, "__file__", None)
    if not path:
        return None
    path = os.path.dirname(os.path.abspath(path))
    return os.path.dirname(path) if hasattr(top, "__path__") else path


def search_folders(near: Sequence[str] = ()) -> list[str]:
    """Where a policy module is looked for before the Python path: ``near`` (the scenario's
    folder), then the working folder; each once, absolute."""
    out: list[str] = []
    for folder in [*near, os.getcwd()]:
        folder = os.path.abspath(folder)
        if folder not in out:
            out.append(folder)
    return out


def load_function(name: str, near: Sequence[str] = ()) -> Callable:
    """The callable ``name`` (``module:function``) names; a FabricError in one line saying
    where it looked when the module is not found, or what else went wrong."""
    mod_name, _, fn_name = name.partition(":")
    if not mod_name or not fn_name:
        raise FabricError(f"policy {name!r}: give it as module:function")
    if not all(part.isidentifier() for part in mod_name.split(".")):
        raise FabricError(f"policy {name!r}: {mod_name!r} is not a module name")
    folders = search_folders(near)
    module = _import(name, mod_name, folders)
    fn = getattr(module, fn_name, None)
    if fn is None:
        raise FabricError(f"policy {name!r}: {mod_name!r} has no {fn_name!r} "
                          f"({_origin(module)})")
    if not callable(fn):
        raise FabricError(f"policy {name!r}: {fn_name!r} is not callable")
    return fn


def _import(name: str, mod_name: str, folders: list[str]):
    top = mod_name.partition(".")[0]
    found = next((f for f in folders if PathFinder.find_spec(top, [f]) is not None), None)
    loaded = module_folder(top) if top in sys.modules else None
    if found and loaded and os.path.realpath(loaded) != os.path.realpath(found):
        raise FabricError(f"policy {name!r}: a module {top!r} is already loaded from {loaded}, "
                          f"not the one in {found}; give yours another name")
    if found:
        sys.path.insert(0, found)      # first for this import only: nothing else is shadowed
    try:
        module = importlib.import_module(mod_name)
    except ModuleNotFoundError as err:
        if err.name and (mod_name + ".").startswith(err.name + "."):
            raise FabricError(f"policy {name!r}: no module {mod_name!r} in "
                              f"{', '.join(folders)} or on the Python path") from None
        raise FabricError(f"policy {name!r}: importing {mod_name!r} failed: {err}") from None
    except Exception as err:  # noqa: BLE001 - the user's module: any error is said in one line
        raise FabricError(f"policy {name!r}: importing {mod_name!r} failed: "
                          f"{type(err).__name__}: {err}") from None
    finally:
        if found:
            sys.path.remove(found)
    if found and found not in sys.path:    # last, for what the module imports when called
        sys.path.append(found)
    return module


def _origin(module) -> str:
    return getattr(module, "__file__", None) or "built in"
