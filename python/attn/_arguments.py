"""Short TypeErrors for calls whose arguments do not fit a signature.

pybind11 answers such a call with its whole signature and the repr of every argument, so one
misspelt keyword next to a large array printed pages of numbers. Each public function and
method is wrapped here: when pybind11 refuses the arguments, the TypeError says what did not
fit (an unknown keyword, with attn's name for a PyTorch one; or the types and shapes given)
and the signature, in a few lines. Errors raised by attn itself pass through unchanged.
"""
import functools
import re

# PyTorch's keywords that attn.sdpa and its kin spell otherwise (attn.scaled_dot_product_attention
# takes PyTorch's own names).
_TORCH_KEYWORDS = {
    "is_causal": "causal=True (bottom-right aligned when Tq != Tk; causal_align=\"top-left\" "
                 "is PyTorch's)",
    "attn_mask": "mask=",
    "enable_gqa": "nothing: grouped K/V heads are always accepted",
    "dropout_p": "nothing: attn has no attention dropout",
}

_REFUSED = re.compile(r"incompatible (function|constructor) arguments")
_MAX_DESCRIPTION = 60


def _describe(value):
    """A value as a few characters: an array by its type, dtype and shape, never its numbers."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{type(value).__name__}({dtype}, shape={tuple(shape)})"
    text = repr(value)
    return text if len(text) <= _MAX_DESCRIPTION else f"<{type(value).__name__}>"


def _first_signature(message):
    """The parameter list of the first signature pybind11's message lists."""
    found = re.search(r"^\s*1\. [\w.]*\((.*)\)", message, re.MULTILINE)
    return found.group(1) if found else None


def _short_message(name, message, args, kwargs):
    signature = _first_signature(message)
    accepted = set(re.findall(r"(\w+): ", signature)) if signature else set()
    lines = []
    for keyword in kwargs:
        if accepted and keyword not in accepted:
            hint = _TORCH_KEYWORDS.get(keyword)
            lines.append(f"{name}() got an unexpected keyword argument {keyword!r}"
                         + (f"; attn's is {hint}" if hint else ""))
    if not lines:
        given = [_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()]
        lines.append(f"{name}(): these arguments do not fit its signature: {', '.join(given)}")
    if signature:
        lines.append(f"signature: {name}({signature})")
    return "\n".join(lines)


def _concise(function, name, method=False):
    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except TypeError as error:
            message = str(error)
            if not _REFUSED.search(message.split("\n", 1)[0]):
                raise
            given = args[1:] if method else args  # a method's self is not the caller's mistake
            raise TypeError(_short_message(name, message, given, kwargs)) from None
    return call


def _is_builtin(value):
    return type(value).__name__ in ("builtin_function_or_method", "instancemethod")


def wrap_module(module, names):
    """Replaces the pybind11 functions `names` of `module` by concise ones."""
    for name in names:
        value = getattr(module, name)
        if _is_builtin(value):
            setattr(module, name, _concise(value, name))


def wrap_class(cls):
    """The same for every method and static method of a pybind11 class."""
    for name, raw in list(vars(cls).items()):
        if name.startswith("__") and name != "__init__" and name != "__call__":
            continue
        if isinstance(raw, staticmethod):
            target = raw.__func__
            if _is_builtin(target):
                setattr(cls, name, staticmethod(_concise(target, f"{cls.__name__}.{name}")))
        elif _is_builtin(raw):
            label = cls.__name__ if name == "__init__" else f"{cls.__name__}.{name}"
            setattr(cls, name, _concise(getattr(cls, name), label, method=True))
