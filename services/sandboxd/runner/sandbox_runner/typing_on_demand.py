"""asyncio without `typing` until code uses it. Two asyncio modules import typing (0.45 MiB
of every idle session's memory) only for annotations and one decorator: asyncio.timeouts
(`from typing import final, Optional, Type`) and asyncio.staggered (`import typing`).
While import_asyncio() imports asyncio, hide() puts a stand-in module in typing's place
whose names are hints (_Hint): subscriptable as typing's generics are, `final` marking a
class as typing.final does, repr'd as typing's own. The first import of the real module
(by user code, or by a name of the stand-in looked up after asyncio's import) puts typing's
names in those modules' globals and their functions' annotations, so that from then on
they hold what they would have held without the stand-in."""

import sys
import types

_HINTED = ("asyncio.timeouts", "asyncio.staggered")


def _type_repr(value):
    """How typing writes an argument of a subscription."""
    if isinstance(value, list):
        return "[" + ", ".join(_type_repr(v) for v in value) + "]"
    if value is Ellipsis:
        return "..."
    if isinstance(value, type):
        if value.__module__ == "builtins":
            return value.__qualname__
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)


def _resolve(value, typing):
    if isinstance(value, _Hint):
        return value.resolve(typing)
    if isinstance(value, (list, tuple)):
        return type(value)(_resolve(v, typing) for v in value)
    return value


class _Hint:
    """A name of typing, or a subscription of one, until typing is imported."""

    __module__ = "typing"                    # inspect writes it as typing's own

    def __init__(self, name, args=None):
        self._name = name
        self._args = args

    def __getitem__(self, args):
        return _Hint(self._name, args)

    def __call__(self, cls):
        """`final`, the one name asyncio calls: what typing.final does."""
        try:
            cls.__final__ = True
        except (AttributeError, TypeError):
            pass
        return cls

    def __repr__(self):
        if self._args is None:
            return f"typing.{self._name}"
        args = self._args if isinstance(self._args, tuple) else (self._args,)
        return f"typing.{self._name}[{', '.join(_type_repr(a) for a in args)}]"

    def resolve(self, typing):
        value = getattr(typing, self._name)
        return value if self._args is None else value[_resolve(self._args, typing)]


class _TypingStandIn(types.ModuleType):
    """typing's place while asyncio is imported; after it, each name is the real one."""

    def __init__(self):
        super().__init__("typing")
        self.importing = True

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if self.importing:
            return _Hint(name)
        import typing
        return getattr(typing, name)


class _ResolveOnImport:
    """On sys.meta_path until typing is imported: gives typing's spec, its loader's
    exec_module followed by _put_real_names."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "typing":
            return None
        sys.meta_path.remove(cls)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        exec_module = spec.loader.exec_module

        def exec_then_put_real_names(module):
            exec_module(module)
            _put_real_names(module)

        spec.loader.exec_module = exec_then_put_real_names
        return spec


def _put_real_names(typing):
    for name in _HINTED:
        module = sys.modules.get(name)
        if module is None:
            continue
        for key, value in list(vars(module).items()):
            if isinstance(value, (_Hint, _TypingStandIn)):
                setattr(module, key, typing if isinstance(value, _TypingStandIn) else value.resolve(typing))
            for function in _functions(value, module):
                function.__annotations__ = {k: _resolve(v, typing)
                                            for k, v in function.__annotations__.items()}


def _functions(value, module):
    """The functions of `module`: itself, or the methods and properties of its classes."""
    if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
        return [value]
    if not isinstance(value, type) or value.__module__ != module.__name__:
        return []
    found = []
    for member in vars(value).values():
        if isinstance(member, property):
            found.extend(f for f in (member.fget, member.fset, member.fdel) if f is not None)
        elif isinstance(member, types.FunctionType):
            found.append(member)
    return found


def hide():
    """Puts the stand-in in typing's place; returns it (None when typing is imported
    already: then nothing is hidden)."""
    if "typing" in sys.modules:
        return None
    stand_in = _TypingStandIn()
    sys.modules["typing"] = stand_in
    return stand_in


def unhide(stand_in):
    """After asyncio's import: the real typing is imported where next asked for."""
    if stand_in is None:
        return
    del sys.modules["typing"]
    stand_in.importing = False
    sys.meta_path.insert(0, _ResolveOnImport)
