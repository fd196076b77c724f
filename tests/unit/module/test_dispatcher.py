"""The native binder, flattener and dispatcher (aitune._C), and serving through them
(docs/reference/recording.md, docs/reference/dispatch.md)."""

from __future__ import annotations

import copy
import enum
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

import aitune
import aitune.torch as ait
from aitune import _C
from aitune.exceptions import GraphNotFoundError
from aitune.torch.module.state import ModuleState

POS_ONLY, POS_OR_KW, VAR_POS, KW_ONLY, VAR_KW = range(5)


def _sig(*params):
    return _C.Signature(list(params))


X_Y = _sig(("x", POS_OR_KW, False), ("y", POS_OR_KW, True))


def _key(sig, args=(), kwargs=None, strict=True):
    key, _ = _C.flatten_call(sig, tuple(args), dict(kwargs or {}), strict)
    return key


# -- binding --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        ((1, 2, 3), {}, "too many positional arguments"),
        ((1,), {"z": 1}, "got an unexpected keyword argument 'z'"),
        ((1,), {"x": 1}, "multiple values for argument 'x'"),
        ((), {"y": 1}, "missing a required argument: 'x'"),
    ],
)
def test_bind_type_errors(args, kwargs, message):
    with pytest.raises(TypeError) as info:
        X_Y.bind(args, kwargs)
    assert str(info.value) == message


def test_bind_does_not_apply_defaults():
    assert X_Y.bind((1,), {}) == {"x": 1}
    assert X_Y.bind((), {"x": 1}) == {"x": 1}
    assert X_Y.bind((1,), {"y": 2}) == {"x": 1, "y": 2}


def test_bind_var_args_and_var_kwargs():
    sig = _sig(("x", POS_OR_KW, False), ("args", VAR_POS, False), ("k", KW_ONLY, False), ("kwargs", VAR_KW, False))
    assert sig.bind((1, 2, 3), {"k": 4, "z": 5, "w": 6}) == {"x": 1, "args": (2, 3), "k": 4, "kwargs": {"z": 5, "w": 6}}
    bound = sig.bind((1,), {"k": 4})
    assert bound.get("args", ()) == () and "kwargs" not in bound
    assert {k: v for k, v in bound.items() if k != "args"} == {"x": 1, "k": 4}


def test_bind_keyword_only_cannot_be_positional():
    sig = _sig(("x", POS_OR_KW, False), ("k", KW_ONLY, False))
    with pytest.raises(TypeError):
        sig.bind((1, 2), {})
    with pytest.raises(TypeError, match="missing a required argument: 'k'"):
        sig.bind((1,), {})


def test_bind_positional_only_cannot_be_keyword():
    sig = _sig(("x", POS_ONLY, False))
    with pytest.raises(TypeError):
        sig.bind((), {"x": 1})


def test_signature_round_trip():
    params = [("x", POS_OR_KW, False), ("args", VAR_POS, False), ("kwargs", VAR_KW, False)]
    assert [tuple(p) for p in _sig(*params).to_list()] == params


# -- flattening and keys ----------------------------------------------------------------------


def test_positional_and_keyword_calls_have_one_key():
    t = torch.ones(2, 3)
    assert _key(X_Y, (t,)) == _key(X_Y, (), {"x": t})
    assert _key(X_Y, (t, 1)) == _key(X_Y, (), {"y": 1, "x": t})


def test_rank_change_changes_the_key():
    assert _key(X_Y, (torch.ones(2, 3),)) != _key(X_Y, (torch.ones(2, 3, 1),))


def test_size_and_dtype_do_not_change_the_key():
    assert _key(X_Y, (torch.ones(2, 3),)) == _key(X_Y, (torch.ones(7, 9, dtype=torch.int64),))


def test_different_constant_changes_the_key():
    t = torch.ones(2)
    assert _key(X_Y, (t, 1)) != _key(X_Y, (t, 2))
    assert _key(X_Y, (t, "a")) != _key(X_Y, (t, "b"))
    assert _key(X_Y, (t, None)) != _key(X_Y, (t,))  # an explicit None is a leaf


@pytest.mark.parametrize("a, b", [(1, 1.0), (0, False), (1, True), (2.0, 2)])
def test_equal_builtin_constants_share_a_key(a, b):
    assert a == b
    t = torch.ones(2)
    assert _key(X_Y, (t, a)) == _key(X_Y, (t, b))


def test_non_strict_mode_ignores_constants():
    t = torch.ones(2)
    assert _key(X_Y, (t, 1), strict=False) == _key(X_Y, (t, 2), strict=False)
    assert _key(X_Y, (t, 1), strict=False) != _key(X_Y, (t.view(1, 2), 1), strict=False)


def test_dict_order_does_not_change_the_key():
    sig = _sig(("inputs", POS_OR_KW, False))
    a, b = torch.ones(2), torch.zeros(2)
    assert _key(sig, ({"a": a, "b": b},)) == _key(sig, ({"b": b, "a": a},))
    assert _key(sig, ({"a": a, "b": b},)) != _key(sig, ({"a": a, "c": b},))


def test_parameter_is_a_tensor_leaf():
    param = torch.nn.Parameter(torch.ones(2, 2))
    key, leaves = _C.flatten_call(X_Y, (param,), {}, True)
    [leaf] = leaves
    assert isinstance(leaf, _C.Leaf)
    assert leaf.is_tensor and not leaf.needs_eq
    assert leaf.value is param
    assert leaf.path == (("p", "x"),)
    assert key == _key(X_Y, (torch.ones(3, 3),))


def test_nested_leaf_paths():
    sig = _sig(("inputs", POS_OR_KW, False))
    _, leaves = _C.flatten_call(sig, ({"b": [torch.ones(1), 3], "a": torch.ones(1)},), {}, True)
    assert [(leaf.path, leaf.is_tensor) for leaf in leaves] == [
        ((("p", "inputs"), ("k", "a")), True),
        ((("p", "inputs"), ("k", "b"), ("i", 0)), True),
        ((("p", "inputs"), ("k", "b"), ("i", 1)), False),
    ]


class Color(enum.Enum):
    RED = 1
    BLUE = 2


def test_non_builtin_constants_are_confirmed_with_eq():
    _, leaves = _C.flatten_call(X_Y, (torch.ones(1), Color.RED), {}, True)
    assert [(leaf.is_tensor, leaf.needs_eq) for leaf in leaves] == [(True, False), (False, True)]


def test_a_leaf_is_read_by_name_not_by_position():
    _, [leaf] = _C.flatten_value({"scale": 2.5})
    assert (leaf.path, leaf.value, leaf.is_tensor, leaf.needs_eq) == ((("k", "scale"),), 2.5, False, False)
    assert repr(leaf) == "Leaf(path=(('k', 'scale'),), is_tensor=False, needs_eq=False)"
    with pytest.raises(TypeError):
        _path, _value, _is_tensor, _needs_eq = leaf  # not a tuple: the fields have names


# -- serving ----------------------------------------------------------------------------------


class MyEnum(enum.Enum):
    A = "a"
    B = "b"
    C = "c"


class EnumModel(torch.nn.Module):
    def forward(self, x, mode):
        return x + (1.0 if mode is MyEnum.A else 100.0)


class Threshold:
    """Unhashable, compared by value."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Threshold) and other.value == self.value


class ThresholdModel(torch.nn.Module):
    def forward(self, x, threshold):
        return (x > threshold.value).float()


def test_enum_graphs_are_served_by_their_own_backends(cpu_eager_strategy):
    m = ait.Module(EnumModel(), "m", strategy=cpu_eager_strategy)
    with torch.no_grad():
        m(torch.ones(2), MyEnum.A)
        m(torch.ones(2), MyEnum.B)
        m(torch.ones(3), mode=MyEnum.A)
    assert [g.input_spec.constants[0].value for g in m.graph_specs] == [MyEnum.A, MyEnum.B]
    m.tune(device="cpu")
    assert m.state is ModuleState.TUNED
    assert len(m.tuned_module.backends) == 2
    assert m.tuned_module.dispatcher.num_graphs == 2
    with torch.no_grad():
        assert torch.equal(m(torch.zeros(2), MyEnum.A), torch.full((2,), 1.0))
        assert torch.equal(m(torch.zeros(2), mode=MyEnum.B), torch.full((2,), 100.0))
        with pytest.raises(GraphNotFoundError):
            m(torch.zeros(2), MyEnum.C)
        with pytest.raises(GraphNotFoundError):
            m(torch.zeros(2), "a")  # equal value, other type: not equal under ==


def test_unhashable_constants_are_compared_with_eq(cpu_eager_strategy):
    m = ait.Module(ThresholdModel(), "m", strategy=cpu_eager_strategy)
    with torch.no_grad():
        m(torch.ones(2), Threshold(0.5))
        m(torch.ones(2), Threshold(1.5))
        m(torch.ones(2), Threshold(0.5))  # a new but equal object joins graph 0
    assert [g.num_calls for g in m.graph_specs] == [2, 1]
    m.tune(device="cpu")
    x = torch.tensor([0.0, 1.0, 2.0])
    with torch.no_grad():
        assert torch.equal(m(x, Threshold(0.5)), torch.tensor([0.0, 1.0, 1.0]))
        assert torch.equal(m(x, Threshold(1.5)), torch.tensor([0.0, 0.0, 1.0]))
        with pytest.raises(GraphNotFoundError):
            m(x, Threshold(2.5))


def test_int_and_float_constants_select_the_same_graph(cpu_eager_strategy):
    class Scaled(torch.nn.Module):
        def forward(self, x, scale):
            return x * scale

    m = ait.Module(Scaled(), "m", strategy=cpu_eager_strategy)
    with torch.no_grad():
        m(torch.ones(2), 2)
    m.tune(device="cpu")
    with torch.no_grad():
        assert torch.equal(m(torch.ones(2), 2.0), torch.full((2,), 2.0))
        with pytest.raises(GraphNotFoundError):
            m(torch.ones(2), 3)


def test_concurrent_calls_match_eager(cpu_eager_strategy):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    reference = copy.deepcopy(model)
    m = ait.Module(model, "threads", strategy=cpu_eager_strategy)

    def func(x):
        m(x)
        m(x.unsqueeze(1))  # a second graph, so concurrent calls select different graphs

    ait.tune(func, [torch.randn(8) for _ in range(2)], device="cpu")
    assert len(m.tuned_module.backends) == 2
    inputs = [torch.randn(1 + i % 5, 8) if i % 2 else torch.randn(1 + i % 5, 1, 8) for i in range(40)]
    with torch.no_grad():
        expected = [reference(x) for x in inputs]

    def worker(thread_index):
        mismatches = 0
        for j in range(200):
            i = (thread_index * 7 + j) % len(inputs)
            with torch.no_grad():
                out = m(inputs[i])
            mismatches += not torch.equal(out, expected[i])
        return mismatches

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(worker, range(8)))
    assert results == [0] * 8


def test_dispatcher_key_of_matches_recorded_graph_key(cpu_eager_strategy):
    m = ait.Module(EnumModel(), "m", strategy=cpu_eager_strategy)
    with torch.no_grad():
        m(torch.ones(2), MyEnum.A)
    m.tune(device="cpu")
    dispatcher = m.tuned_module.dispatcher
    assert dispatcher.key_of((torch.ones(5),), {"mode": MyEnum.A}) == m.graph_specs[0].key
    assert dispatcher.key_of((torch.ones(5, 1),), {"mode": MyEnum.A}) != m.graph_specs[0].key


_ERRORS_THEN_EXIT = r"""
import threading
import torch
import aitune.torch as ait
from aitune.exceptions import ProfileShapeError
from aitune.torch.backend import TorchEagerBackend

ait.config.cache_dir = {cache_dir!r}
m = ait.Module(torch.nn.Linear(5, 2), "m", strategy=ait.OneBackendStrategy(TorchEagerBackend()))
with torch.no_grad():
    m(torch.ones(1, 5))
m.tune(device="cpu")


def failing_calls():
    with torch.no_grad():
        for call in (lambda: m(torch.ones(1, 5, dtype=torch.float16)), lambda: m(), lambda: m(torch.ones(1, 5), 3)):
            try:
                call()
            except (ProfileShapeError, TypeError):
                pass
            else:
                raise SystemExit("expected an error")


worker = threading.Thread(target=failing_calls)
worker.start()
worker.join()
failing_calls()
print("done")
"""


def test_dispatcher_errors_leave_no_references_behind(tmp_path):
    """A call that fails inside the dispatcher (dtype check, binding) must not leave Python
    references in per-thread native buffers: releasing them at thread or process exit, without
    the GIL, aborts the process."""
    script = _ERRORS_THEN_EXIT.format(cache_dir=str(tmp_path / "cache"))
    env = os.environ.copy()
    package_root = str(Path(aitune.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_root, env.get("PYTHONPATH", "")] if p)
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("done")


class _ArrayScaled(torch.nn.Module):
    def forward(self, x, weights):
        return x * torch.as_tensor(weights, dtype=x.dtype)


def test_numpy_constants_identify_graphs_when_recording_and_serving(cpu_eager_strategy):
    import numpy as np

    m = ait.Module(_ArrayScaled(), "arrays", strategy=cpu_eager_strategy)
    x = torch.ones(2, 2)
    with torch.no_grad():
        m(x, np.array([1.0, 2.0]))
        m(x, np.array([1.0, 2.0]))  # equal array: same graph, no "truth value is ambiguous" error
        m(x, np.array([3.0, 4.0]))  # different values: a second graph
    assert [g.name for g in m.graph_specs] == ["0", "1"]
    m.tune(device="cpu")
    with torch.no_grad():
        assert torch.equal(m(x, np.array([3.0, 4.0])), x * torch.tensor([3.0, 4.0]))
        with pytest.raises(GraphNotFoundError):
            m(x, np.array([5.0, 6.0]))


def test_calls_outside_the_recorded_envelope_are_logged_once(cpu_eager_strategy, aitune_log):
    m = ait.Module(torch.nn.Linear(4, 2), "envelope", strategy=cpu_eager_strategy)
    ait.tune(m, [torch.randn(4) for _ in range(2)], device="cpu")  # batch sizes 1 and 2
    aitune_log.clear()
    with torch.no_grad():
        m(torch.randn(2, 4))  # inside: nothing logged
        assert "outside the tuned range" not in aitune_log.text
        m(torch.randn(7, 4))
        m(torch.randn(9, 4))
    lines = [r.getMessage() for r in aitune_log.records if "outside the tuned range" in r.getMessage()]
    assert len(lines) == 1
    assert "[7, 4]" in lines[0] and "min [1, 4], max [2, 4]" in lines[0]


def test_unknown_graph_message_lists_tensors_then_known_graphs(cpu_eager_strategy):
    m = ait.Module(torch.nn.Linear(4, 2), "unknown", strategy=cpu_eager_strategy)
    ait.tune(m, [torch.randn(4) for _ in range(2)], device="cpu")
    with torch.no_grad(), pytest.raises(GraphNotFoundError) as info:
        m(torch.randn(3, 2, 4))
    message = str(info.value)
    assert message.startswith("No backend found for a graph with metadata: Tensors: input: [3, 2, 4] torch.float32")
    assert "graph 0: Tensors: input: ['batch0', 4] torch.float32" in message


class _Doubler(torch.nn.Module):
    def forward(self, x):
        return x * 2


def test_a_python_error_served_through_the_cuda_graph_runner_keeps_its_type():
    # The CUDA-graph runner serves Python backends through the dispatcher's native path; on CPU
    # tensors it calls them directly. What the backend raised must reach the caller as is.
    m = ait.Module(_Doubler(), "doubler")
    with torch.no_grad():
        m(torch.randn(2, 3))
    graph = m.graph_specs[0]

    def broken_backend(x):
        raise KeyError("the backend's own error")

    from aitune.torch.backend.common.serving import eq_checks, input_rules

    dispatcher = _C.Dispatcher(_C.Signature(graph.forward_params), True, -1, "doubler", None, None, None)
    dispatcher.add_graph(
        graph.key,
        graph.name,
        broken_backend,
        eq_checks(graph.input_spec),
        input_rules(graph.input_spec, None),
        native=_C.CudaGraphRunner(broken_backend, cache_size=1, clone_outputs=True),
        input_order=[0],
    )
    with pytest.raises(KeyError, match="the backend's own error"):
        dispatcher(torch.randn(2, 3))
