"""Recording: binding, flattening and names, graph identity, dynamic axes, samples and spec
tables (docs/reference/recording.md)."""

from __future__ import annotations

import dataclasses
import functools
import math
import re

import pytest
import torch

import aitune.torch as ait
from aitune.torch.config import config
from aitune.torch.global_context import published_batch_size
from aitune.torch.graph.locator import tensor_name
from aitune.torch.module.state import ModuleState


class Scale(torch.nn.Module):
    def forward(self, x, y=None):
        return x * 2


class DictInput(torch.nn.Module):
    def forward(self, inputs):
        return inputs["tokens"] + inputs["mask"]


class ListInput(torch.nn.Module):
    def forward(self, items):
        return items[0].sum() + items[1].sum()


@dataclasses.dataclass
class Request:
    image: torch.Tensor
    label: int = 3


class DataclassInput(torch.nn.Module):
    def forward(self, request):
        return request.image * request.label


class VarArgs(torch.nn.Module):
    def forward(self, *args):
        return sum(a.sum() for a in args)


class WithFlag(torch.nn.Module):
    def forward(self, x, flag=True):
        return x if flag else -x


class Identity(torch.nn.Module):
    def forward(self, x):
        return x


class TwoInputs(torch.nn.Module):
    def forward(self, x, y):
        return x.sum() + y.sum()


class MultiOutput(torch.nn.Module):
    def forward(self, x):
        return x, {"logits": x * 2}


class Mutating(torch.nn.Module):
    def forward(self, x):
        x.add_(1)  # like a KV cache update
        return x


def _tensor_leaves(module, graph=0):
    return [(t.access_path, t.semantic_path) for t in module.graph_specs[graph].input_spec.tensors]


def _record(module, *calls):
    """Runs (args, kwargs, batch_size) calls under no_grad with the batch size published."""
    with torch.no_grad():
        for args, kwargs, bs in calls:
            with published_batch_size(bs):
                module(*args, **kwargs)


# -- binding ------------------------------------------------------------------------------


def test_positional_and_keyword_calls_are_one_graph():
    m = ait.Module(Scale(), "m")
    x = torch.ones(2, 3)
    with torch.no_grad():
        m(x)
        m(x=x)
    assert m.state is ModuleState.RECORDING
    assert len(m.graph_specs) == 1
    graph = m.graph_specs[0]
    assert graph.num_calls == 2
    # defaults are not applied: `y` is not part of the layout
    assert _tensor_leaves(m) == [("x", "x")]
    assert graph.input_spec.constants == []


def test_defaulted_argument_given_explicitly_is_part_of_the_layout():
    m = ait.Module(Scale(), "m")
    with torch.no_grad():
        m(torch.ones(2))
        m(torch.ones(2), torch.ones(2))
    assert len(m.graph_specs) == 2
    assert _tensor_leaves(m, 1) == [("x", "x"), ("y", "y")]


def _passthrough_decorator(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


class NoGradForward(torch.nn.Module):
    @torch.no_grad()
    def forward(self, x, y=None):
        return x * 2


class DecoratedForward(torch.nn.Module):
    @_passthrough_decorator
    def forward(self, x, y=None):
        return x * 2


class PartialForward(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.forward = functools.partial(self._forward, scale=3.0)

    def _forward(self, x, scale):
        return x * scale


@pytest.mark.parametrize("model_cls", [NoGradForward, DecoratedForward], ids=["torch.no_grad", "functools.wraps"])
def test_decorated_forward_is_bound_through_wrapped(model_cls):
    """A decorated forward is bound by the signature it wraps
    (docs/reference/recording.md#binding-flattening-and-names), without `self`."""
    m = ait.Module(model_cls(), "m")
    with torch.no_grad():
        out = m(torch.ones(2))
        m(x=torch.ones(2))
    assert torch.equal(out, torch.full((2,), 2.0))
    assert len(m.graph_specs) == 1 and m.graph_specs[0].num_calls == 2
    assert _tensor_leaves(m) == [("x", "x")]


def test_partial_forward_is_bound_through_partial(cpu_eager_strategy):
    m = ait.Module(PartialForward(), "m", strategy=cpu_eager_strategy)
    with torch.no_grad():
        assert torch.equal(m(torch.ones(2)), torch.full((2,), 3.0))
    assert [leaf.access_path for leaf in m.graph_specs[0].input_spec.leaves] == ["x"]
    m.tune(device="cpu")
    with torch.no_grad():
        assert torch.equal(m(x=torch.ones(3)), torch.full((3,), 3.0))


# -- flattening and paths -----------------------------------------------------------------


def test_dict_input_paths():
    m = ait.Module(DictInput(), "m")
    with torch.no_grad():
        m(inputs={"tokens": torch.ones(2, 4), "mask": torch.zeros(2, 4)})
    leaves = dict(_tensor_leaves(m))
    assert leaves['inputs["tokens"]'] == ("inputs", "tokens")
    assert leaves['inputs["mask"]'] == ("inputs", "mask")
    assert len(leaves) == 2


def test_list_input_paths():
    m = ait.Module(ListInput(), "m")
    with torch.no_grad():
        m([torch.ones(2), torch.ones(3, 3)])
    assert _tensor_leaves(m) == [("items[0]", ("items", 0)), ("items[1]", ("items", 1))]
    shapes = [t.spec.max_shape for t in m.graph_specs[0].input_spec.tensors]
    assert shapes == [[2], [3, 3]]


def test_dataclass_input_paths():
    m = ait.Module(DataclassInput(), "m")
    with torch.no_grad():
        m(Request(torch.ones(2, 2), label=5))
    spec = m.graph_specs[0].input_spec
    assert _tensor_leaves(m) == [("request.image", ("request", "image"))]
    assert [(c.access_path, c.semantic_path, c.value) for c in spec.constants] == [
        ("request.label", ("request", "label"), 5)
    ]


def test_var_args_paths():
    m = ait.Module(VarArgs(), "m")
    with torch.no_grad():
        m(torch.ones(2), torch.ones(3))
    assert _tensor_leaves(m) == [("args[0]", ("args", 0)), ("args[1]", ("args", 1))]


def test_dict_order_does_not_matter():
    m = ait.Module(DictInput(), "m")
    with torch.no_grad():
        m(inputs={"tokens": torch.ones(2), "mask": torch.ones(2)})
        m(inputs={"mask": torch.ones(2), "tokens": torch.ones(2)})
    assert len(m.graph_specs) == 1
    assert m.graph_specs[0].num_calls == 2


def test_output_paths():
    m = ait.Module(MultiOutput(), "m")
    with torch.no_grad():
        m(torch.ones(2))
    outputs = m.graph_specs[0].output_spec.tensors
    assert [(t.access_path, t.semantic_path, t.name) for t in outputs] == [
        ("output[0]", 0, "output_0"),
        ('output[1]["logits"]', (1, "logits"), "output_1_logits"),
    ]
    single = ait.Module(Identity(), "single")
    with torch.no_grad():
        single(torch.ones(2))
    [whole] = single.graph_specs[0].output_spec.tensors
    assert (whole.access_path, whole.semantic_path, whole.name) == ("output", (), "output")


# -- graph identity -----------------------------------------------------------------------


def test_rank_change_makes_a_new_graph():
    m = ait.Module(Identity(), "m")
    with torch.no_grad():
        m(torch.ones(2, 3))
        m(torch.ones(2, 3, 4))
        m(torch.ones(5, 3))
    assert [g.name for g in m.graph_specs] == ["0", "1"]
    assert [t.spec.rank for g in m.graph_specs for t in g.input_spec.tensors] == [2, 3]
    assert [g.num_calls for g in m.graph_specs] == [2, 1]


def test_size_and_dtype_do_not_split_graphs():
    m = ait.Module(Identity(), "m")
    with torch.no_grad():
        m(torch.ones(2, 3))
        m(torch.ones(4, 7, dtype=torch.float16))
    assert len(m.graph_specs) == 1
    [leaf] = m.graph_specs[0].input_spec.tensors
    assert leaf.dtypes == [torch.float32, torch.float16]
    assert leaf.spec.min_shape == [2, 3] and leaf.spec.max_shape == [4, 7]


def test_different_constant_makes_a_new_graph_in_strict_mode():
    assert config.strict_mode is True
    m = ait.Module(WithFlag(), "m")
    with torch.no_grad():
        m(torch.ones(2), flag=True)
        m(torch.ones(2), flag=False)
        m(torch.ones(2), True)
    assert [g.name for g in m.graph_specs] == ["0", "1"]
    assert [g.input_spec.constants[0].value for g in m.graph_specs] == [True, False]
    assert [g.num_calls for g in m.graph_specs] == [2, 1]


def test_same_values_in_non_strict_mode_make_one_graph():
    config.strict_mode = False
    m = ait.Module(WithFlag(), "m")
    with torch.no_grad():
        m(torch.ones(2), flag=True)
        m(torch.ones(2), flag=False)
    assert len(m.graph_specs) == 1
    assert m.graph_specs[0].num_calls == 2


# -- dynamic axes (docs/reference/recording.md#dynamic-axes examples)
# ----------------------------------------------------


def test_tune_with_two_batch_sizes_infers_batch_and_dim_axes():
    m = ait.Module(Identity(), "m")
    last_axis = {1: 3, 3: 6}

    def func(x):
        bs = x.shape[0]
        m(torch.ones(bs, 2, last_axis[bs]))

    ait.tune(
        func,
        [torch.ones(1) for _ in range(3)],
        batch_sizes=[1, 3],
        max_num_batches_per_batch_size=1,
        device="cpu",
        dry_run=True,
    )
    assert m.state is ModuleState.RECORDING
    [graph] = m.graph_specs
    [leaf] = graph.input_spec.tensors
    assert leaf.spec.shape == ["batch0", 2, "dim2"]
    assert leaf.spec.min_shape == [1, 2, 3]
    assert leaf.spec.max_shape == [3, 2, 6]
    assert graph.has_batch_axis()
    assert graph.max_batch_size() == 3
    assert "['batch0', 2, 'dim2']" in graph.input_spec.table()


@pytest.mark.parametrize(
    "calls, shape, min_shape, max_shape, multipliers",
    [
        pytest.param(
            [([1, 2, 3], 1), ([3, 2, 6], 3)], ["batch0", 2, "dim2"], [1, 2, 3], [3, 2, 6], {0: 1}, id="1-batch-and-dim"
        ),
        pytest.param(
            [([1, 2, 3], 1), ([3, 2, 6], 3), ([4, 2, 4], 1)],
            ["dim0", 2, "dim2"],
            [1, 2, 3],
            [4, 2, 6],
            {},
            id="2-batch-demoted",
        ),
        pytest.param(
            [([3, 2, 6], 3), ([5, 4, 10], 5)],
            ["batch0", "dim1", "batch2"],
            [3, 2, 6],
            [5, 4, 10],
            {0: 1, 2: 2},
            id="3-stacked-batch",
        ),
        pytest.param(
            [([1, 3, 224], None), ([2, 3, 256], None)],
            ["dim0", 3, "dim2"],
            [1, 3, 224],
            [2, 3, 256],
            {},
            id="4-unknown-batch-size",
        ),
    ],
)
def test_shape_lattice_examples(calls, shape, min_shape, max_shape, multipliers):
    m = ait.Module(Identity(), "m")
    _record(m, *[((torch.ones(*s),), {}, bs) for s, bs in calls])
    [leaf] = m.graph_specs[0].input_spec.tensors
    assert leaf.spec.shape == shape
    assert leaf.spec.min_shape == min_shape
    assert leaf.spec.max_shape == max_shape
    assert leaf.spec.batch_multipliers == multipliers
    assert m.graph_specs[0].has_batch_axis() == bool(multipliers)


def test_one_batch_size_gives_static_shapes(aitune_log):
    m = ait.Module(Identity(), "m")
    ait.tune(m, [torch.ones(3) for _ in range(8)], batch_sizes=[4], device="cpu", dry_run=True)
    [graph] = m.graph_specs
    [leaf] = graph.input_spec.tensors
    assert leaf.spec.shape == [4, 3]
    assert leaf.spec.min_shape == leaf.spec.max_shape == [4, 3]
    assert not graph.input_spec.has_dynamic_axis()
    assert not graph.has_batch_axis()
    warnings = [r for r in aitune_log.records if r.levelname == "WARNING"]
    assert any(r.getMessage() == "Only 1 batch size provided, static shapes will be assumed." for r in warnings)


def test_default_batch_sizes_are_one_and_two(aitune_log):
    m = ait.Module(Identity(), "m")
    ait.tune(m, [torch.ones(3) for _ in range(2)], device="cpu", dry_run=True)
    assert "No batch sizes provided, using default batch sizes [1, 2]." in aitune_log.messages
    [leaf] = m.graph_specs[0].input_spec.tensors
    assert leaf.spec.shape == ["batch0", 3]
    assert leaf.spec.min_shape == [1, 3] and leaf.spec.max_shape == [2, 3]


def test_graph_has_batch_axis_only_if_every_tensor_has_one():
    m = ait.Module(TwoInputs(), "m")
    _record(m, ((torch.ones(1, 4), torch.ones(7)), {}, 1), ((torch.ones(2, 4), torch.ones(7)), {}, 2))
    graph = m.graph_specs[0]
    x, y = graph.input_spec.tensors
    assert x.spec.shape == ["batch0", 4]
    assert y.spec.shape == [7]
    assert not graph.has_batch_axis()
    assert graph.max_batch_size() == 2  # largest max / multiplier over the batch axes


# -- samples ------------------------------------------------------------------------------


def test_one_sample_is_stored_and_it_is_the_first_call():
    assert config.max_num_samples_stored == 1
    m = ait.Module(Identity(), "m")
    first = torch.full((1, 3), 1.0)
    _record(m, ((first,), {}, 1), ((torch.full((2, 3), 2.0),), {}, 2), ((torch.full((2, 3), 3.0),), {}, 2))
    samples = m.graph_specs[0].samples
    assert len(samples) == 1
    assert samples[0].batch_size == 1
    assert torch.equal(samples[0].args[0], torch.full((1, 3), 1.0))
    assert samples[0].args[0] is not first


def test_stored_sample_is_a_deep_copy():
    m = ait.Module(DictInput(), "m")
    tokens = torch.ones(2)
    with torch.no_grad():
        m(inputs={"tokens": tokens, "mask": torch.zeros(2)})
    tokens.add_(41)  # mutate the caller's tensor after the call
    stored = m.graph_specs[0].samples[0]
    stored_inputs = {**dict(zip(["inputs"], stored.args)), **stored.kwargs}["inputs"]
    assert stored_inputs["tokens"] is not tokens
    assert torch.equal(stored_inputs["tokens"], torch.ones(2))


def test_samples_use_the_canonical_layout():
    """A sample is the canonical (args, kwargs) of its call (docs/design.md#glossary,
    docs/reference/recording.md#binding-flattening-and-names): m(x) and m(x=x) store the same layout, positional
    parameters positionally."""
    m = ait.Module(Scale(), "m")
    config.max_num_samples_stored = float("inf")
    with torch.no_grad():
        m(torch.ones(2))
        m(x=torch.ones(2))
    layouts = [(len(s.args), sorted(s.kwargs)) for s in m.graph_specs[0].samples]
    assert layouts == [(1, []), (1, [])]


def test_sample_is_copied_before_the_forward_runs():
    m = ait.Module(Mutating(), "m")
    x = torch.zeros(3)
    with torch.no_grad():
        out = m(x)
    assert torch.equal(out, torch.ones(3))  # the forward did mutate its input
    assert torch.equal(m.graph_specs[0].samples[0].args[0], torch.zeros(3))


def test_infinite_samples_keeps_every_call():
    config.max_num_samples_stored = float("inf")
    m = ait.Module(Identity(), "m")
    _record(m, *[((torch.full((bs, 2), float(bs)),), {}, bs) for bs in (1, 2, 3)])
    samples = m.graph_specs[0].samples
    assert [s.batch_size for s in samples] == [1, 2, 3]
    assert [s.args[0][0, 0].item() for s in samples] == [1.0, 2.0, 3.0]


def test_each_graph_keeps_its_own_samples():
    m = ait.Module(Identity(), "m")
    _record(m, ((torch.ones(2),), {}, None), ((torch.ones(2, 2),), {}, None), ((torch.ones(3),), {}, None))
    assert [len(g.samples) for g in m.graph_specs] == [1, 1]
    assert [list(g.samples[0].args[0].shape) for g in m.graph_specs] == [[2], [2, 2]]


# -- names and tables ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, prefix, expected",
    [
        ("x", "input", "input_x"),
        (("options", "mask"), "input", "input_options_mask"),
        (("items", 1), "input", "input_items_1"),
        (("request", "image"), "input", "input_request_image"),
        (("args", 1), "input", "input_args_1"),
        ((), "output", "output"),
        (0, "output", "output_0"),
        ("logits", "output", "output_logits"),
        (("a-b", "c d"), "input", "input_a_b_c_d"),
    ],
)
def test_tensor_names(path, prefix, expected):
    assert tensor_name(path, prefix) == expected


def test_recorded_leaves_carry_their_tensor_names():
    m = ait.Module(DictInput(), "m")
    with torch.no_grad():
        m(inputs={"tokens": torch.ones(2), "mask": torch.ones(2)})
    names = sorted(t.name for t in m.graph_specs[0].input_spec.tensors)
    assert names == ["input_inputs_mask", "input_inputs_tokens"]


def test_spec_table_layout():
    m = ait.Module(WithFlag(), "m")
    _record(m, ((torch.ones(1, 2, 3),), {"flag": True}, 1), ((torch.ones(3, 2, 6),), {"flag": True}, 3))
    table = m.graph_specs[0].input_spec.table()
    assert "Tensors:" in table
    header_line = next(line for line in table.splitlines() if "Access Path" in line)
    assert "Access Path │ Semantic Path │ Shape │ Min Shape │ Max Shape │ Dtype" in re.sub(" +", " ", header_line)
    columns = [c.strip() for c in header_line.strip("│").split("│")]
    assert columns == ["Access Path", "Semantic Path", "Shape", "Min Shape", "Max Shape", "Dtype"]
    for box in "╒╞╘":
        assert box in table
    row = next(line for line in table.splitlines() if line.startswith("│ x "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells == ["x", "x", "['batch0', 2, 'dim2']", "[1, 2, 3]", "[3, 2, 6]", "torch.float32"]
    assert "Other:" in table
    other_header = next(line for line in table.splitlines() if "Value" in line)
    assert [c.strip() for c in other_header.strip("│").split("│")] == ["Access Path", "Semantic Path", "Value"]


def test_nested_semantic_path_is_shown_as_str_of_tuple():
    m = ait.Module(DictInput(), "m")
    with torch.no_grad():
        m(inputs={"tokens": torch.ones(2), "mask": torch.ones(2)})
    table = m.graph_specs[0].input_spec.table()
    assert "('inputs', 'tokens')" in table
    assert 'inputs["tokens"]' in table


def test_nan_multiplier_for_unknown_batch_size():
    m = ait.Module(Identity(), "m")
    _record(m, ((torch.ones(2, 3),), {}, None))
    [leaf] = m.graph_specs[0].input_spec.tensors
    assert all(math.isnan(v) for v in leaf.spec.multipliers)
