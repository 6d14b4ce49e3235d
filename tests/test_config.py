"""Scenario files: valid input, every kind of invalid input (one-line typed errors), sweep expansion."""

from __future__ import annotations

import itertools
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from plain_cases import plain_case

from mhabench.errors import (
    MAX_LISTED_ERRORS,
    ConfigError,
    DeviceUnavailableError,
    InputError,
    UnknownImplementationError,
)
from mhabench.scenario.cases import covered_windows, expand_cases
from mhabench.scenario.config import RunConfig
from mhabench.scenario.device import resolve_device
from mhabench.scenario.loading import load_config, load_default_config, parse_config
from mhabench.scenario.overrides import with_overrides

SOURCE = "configs/x.yaml"
VALID_YAML = """\
device: cpu
dtype: float32
implementations: [naive, fused]
timing: {min_run_time_s: 0.05, min_samples: 4}
scenarios:
  - name: base
    batch: 1
    seq_len: [128, 512]
    d_model: 64
    heads: [4, 8]
    causal: true
    seed: 3
"""
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised when CUDA is missing")


def scenario(**fields: Any) -> dict[str, Any]:
    return {"seq_len": 8, "d_model": 16, "heads": 2, **fields}


def config_error(data: Any, error: type[Exception] = ConfigError) -> str:
    """Parse ``data`` expecting ``error``; return its message after checking it is one line."""
    with pytest.raises(error) as caught:
        parse_config(data, SOURCE)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{SOURCE}: ")
    assert isinstance(caught.value, InputError)
    return message


def write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_valid_file_parses_every_field(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, VALID_YAML))
    assert config.device == "cpu"
    assert config.dtype == ["float32"]
    assert config.implementations == ["naive", "fused"]
    assert config.timing.min_run_time_s == 0.05
    assert config.timing.min_samples == 4
    assert config.timing.warmup_runs == 2  # default kept
    spec = config.scenarios[0]
    assert (spec.name, spec.batch, spec.seq_len, spec.d_model, spec.heads) == ("base", [1], [128, 512], [64], [4, 8])
    assert (spec.causal, spec.bias, spec.seed) == ([True], [False], 3)


def test_name_defaults_to_file_stem_and_explicit_name_wins(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, VALID_YAML, "seq-sweep.yaml")).name == "seq-sweep"
    assert load_config(write(tmp_path, "name: mine\n" + VALID_YAML)).name == "mine"


def test_configs_default_is_the_packaged_file_and_the_documented_scenario() -> None:
    """``configs/default.yaml`` must resolve to the file the wheel ships, and that file must hold the
    scenario the README documents (a copy that drifted, or an edited default, fails here)."""
    shipped = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
    packaged = Path(str(resources.files("mhabench.scenario").joinpath("default.yaml"))).resolve()
    assert shipped.resolve() == packaged
    config = load_default_config()
    assert (config.name, config.device, config.dtype) == ("default", "auto", ["auto"])
    assert config.implementations == ["naive", "per_head", "fused", "torch_mha"]
    expected = dict(name="seq-sweep", batch=[1], seq_len=[16, 1024], d_model=[512], heads=[8], causal=[False])
    expected |= dict(bias=[False], mode=["forward"], phase=["prefill"], tensor_parallel=[1])
    [spec] = config.scenarios
    assert spec.model_dump(include=set(expected)) == expected
    ids = [case.case_id for case in expand_cases(config, torch.device("cpu"))]
    assert ids == [f"seq-sweep/b1-n{n}-d512-h8-float32" for n in (16, 1024)]


def test_empty_file(tmp_path: Path) -> None:
    path = write(tmp_path, "# only a comment\n")
    with pytest.raises(ConfigError, match="the file is empty") as caught:
        load_config(path)
    assert str(path) in str(caught.value)


def test_file_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "- naive\n- fused\n")
    with pytest.raises(ConfigError, match="expected a mapping of fields, got a list") as caught:
        load_config(path)
    assert str(path) in str(caught.value)


def test_malformed_yaml_reports_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: a\ndevice: cpu\nscenarios: [\n  {seq_len: 8,, d_model: }\n  oops: [\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: invalid YAML at line ")
    line = int(message.split("at line ")[1].split(",")[0])
    assert 3 <= line <= 6
    assert "\n" not in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("data", "path", "suggestion"),
    [
        ({"scenarios": [scenario(sead=1)]}, "scenarios[0].sead", "'seed'"),
        ({"scenarios": [scenario()], "timing": {"min_run_tim_s": 1}}, "timing.min_run_tim_s", "'min_run_time_s'"),
        ({"scenarios": [scenario()], "implementaions": ["naive"]}, "implementaions", "'implementations'"),
        ({"scenarios": [scenario()], "energy": {"window": 2}}, "energy.window", "'windows'"),
    ],
)
def test_typo_names_the_key_and_suggests_the_closest(data: dict[str, Any], path: str, suggestion: str) -> None:
    message = config_error(data)
    assert f"{SOURCE}: {path}: unknown field" in message
    assert f"did you mean {suggestion}?" in message


def test_unrelated_unknown_key_lists_the_known_fields() -> None:
    message = config_error({"scenarios": [scenario()], "zzzzzz": 1})
    assert "zzzzzz: unknown field" in message
    assert "known fields: name, device, dtype, implementations, timing, scenarios" in message


@pytest.mark.parametrize(
    ("energy", "shown"),
    [
        ({"windows": -1}, "energy.windows: Input should be greater than or equal to 0 (got -1)"),
        ({"windows": 101}, "energy.windows: Input should be less than or equal to 100 (got 101)"),
        ({"windows": 1.5}, "energy.windows: Input should be a valid integer (got 1.5)"),
        ({"windows": 1, "window_s": 0.5}, "energy.window_s: Input should be greater than or equal to 1 (got 0.5)"),
        ({"window_s": float("nan")}, "energy.window_s: Input should be a finite number (got nan)"),
        ({"zzzzzz": 1}, "energy.zzzzzz: unknown field; known fields: windows, window_s"),
        ([1], "energy: Input should be a valid dictionary or instance of EnergyConfig (got [1])"),
    ],
)
def test_a_bad_energy_section_is_one_line_naming_the_field_and_value(energy: object, shown: str) -> None:
    message = config_error({"scenarios": [scenario()], "energy": energy})
    assert message == f"{SOURCE}: {shown}"


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("seq_len", 8.5, "8.5"),
        ("seq_len", "abc", "'abc'"),
        ("d_model", 0, "0"),
        ("batch", -2, "-2"),
        ("seq_len", [8, -3], "-3"),
        ("heads", True, "True"),  # a bool is not an int here
        ("batch", [1, False], "False"),
    ],
)
def test_bad_sizes_name_field_and_value(field: str, value: Any, shown: str) -> None:
    message = config_error({"scenarios": [scenario(), scenario(**{field: value})]})
    assert f"{SOURCE}: scenarios[1].{field}: " in message
    assert f"(got {shown})" in message


def test_bool_flag_rejects_a_string() -> None:
    message = config_error({"scenarios": [scenario(causal="sometimes")]})
    assert "scenarios[0].causal" in message
    assert "'sometimes'" in message


def test_required_size_missing() -> None:
    data = {"scenarios": [{"seq_len": 8, "heads": 2}]}
    assert "scenarios[0].d_model: required field is missing" in config_error(data)


def test_no_scenarios() -> None:
    assert "scenarios" in config_error({"scenarios": []})
    assert "scenarios: required field is missing" in config_error({"name": "x"})


def test_unknown_dtype() -> None:
    message = config_error({"scenarios": [scenario()], "dtype": "float8"})
    assert "dtype" in message
    assert "'float8'" in message
    assert "'bfloat16'" in message  # says what is allowed


def test_unknown_implementation_lists_known_ones() -> None:
    message = config_error(
        {"scenarios": [scenario()], "implementations": ["naive", "nope"]}, UnknownImplementationError
    )
    assert f"{SOURCE}: implementations: unknown implementation 'nope'" in message
    for name in ("naive", "per_head", "fused", "torch_mha"):
        assert name in message


def test_d_model_not_divisible_by_heads_names_heads() -> None:
    message = config_error({"scenarios": [scenario(d_model=500, heads=[4, 8])]})
    assert message == f"{SOURCE}: scenarios[0].heads: d_model 500 is not divisible by heads 8"


def test_bad_timing_value() -> None:
    message = config_error({"scenarios": [scenario()], "timing": {"min_run_time_s": 0}})
    assert "timing.min_run_time_s" in message
    assert "(got 0)" in message


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "cuda:", "CPU", "cuda:-1"])
def test_bad_device_syntax(device: str) -> None:
    message = config_error({"scenarios": [scenario()], "device": device})
    assert f"{SOURCE}: device: " in message
    assert repr(device) in message


@pytest.mark.parametrize("device", ["cpu", "auto", "cuda", "cuda:1"])
def test_good_device_syntax_parses(device: str) -> None:
    assert parse_config({"scenarios": [scenario()], "device": device}, SOURCE).device == device


@no_cuda
@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_without_cuda_is_an_input_error(device: str) -> None:
    config = parse_config({"scenarios": [scenario()], "device": device}, SOURCE)
    with pytest.raises(DeviceUnavailableError, match="CUDA is not available") as caught:
        resolve_device(config.device)
    assert caught.value.exit_code == 2
    assert repr(device) in str(caught.value)


def test_auto_device_and_dtype_resolve_to_this_machine() -> None:
    config = parse_config({"scenarios": [scenario()]}, SOURCE)
    device = resolve_device(config.device)
    assert device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert {case.dtype for case in expand_cases(config, torch.device("cpu"))} == {"float32"}


@pytest.mark.parametrize(("capability", "dtype"), [((9, 0), "bfloat16"), ((8, 0), "bfloat16"), ((7, 0), "float16")])
def test_auto_dtype_on_cuda_follows_the_compute_capability(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], dtype: str
) -> None:
    """bf16 from Ampere on; before it torch emulates bf16, so auto picks fp16 there."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    config = parse_config({"scenarios": [scenario()]}, SOURCE)
    assert {case.dtype for case in expand_cases(config, torch.device("cuda"))} == {dtype}


def test_the_embedded_default_follows_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """No config on a CUDA machine: the data-centre GPU sweep; on the CPU the small one; --device decides."""
    from mhabench.scenario.loading import default_config_name, load_default_config

    assert default_config_name("cpu") == "default.yaml" and load_default_config("cpu").name == "default"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert default_config_name() == default_config_name("cuda:0") == "default_gpu.yaml"
    assert load_default_config().name == "default-gpu" and default_config_name("cpu") == "default.yaml"


def test_sweep_is_the_cartesian_product_in_order() -> None:
    spec = scenario(name="s", batch=[1, 2], seq_len=[8, 16, 32], d_model=[16, 32], heads=[2, 4], causal=[False, True])
    config = parse_config({"scenarios": [spec, scenario(name="second")], "dtype": ["float32", "bfloat16"]}, SOURCE)
    cases = expand_cases(config, torch.device("cpu"))
    first = cases[:-2]
    expected = [
        plain_case("s", b, n, d, h, c, False, dtype, 0)
        for dtype, b, n, d, h, c in itertools.product(
            ["float32", "bfloat16"], [1, 2], [8, 16, 32], [16, 32], [2, 4], [False, True]
        )
    ]
    assert len(first) == 2 * 2 * 3 * 2 * 2 * 2
    assert first == expected
    assert [c.scenario for c in cases[-2:]] == ["second", "second"]
    assert len(set(c.case_id for c in cases)) == len(cases)


def test_case_id_and_head_dim() -> None:
    spec = scenario(name="s", batch=2, seq_len=9, d_model=16, heads=4, causal=True, bias=True)
    (case,) = expand_cases(parse_config({"scenarios": [spec], "dtype": "float32"}, SOURCE), torch.device("cpu"))
    assert (case.head_dim, case.kv_heads) == (4, 4)  # unset: d_model / heads and plain MHA, resolved by expand_cases
    assert case.case_id == "s/b2-n9-d16-h4-float32-causal-bias"


def test_auto_dtype_is_deduplicated() -> None:
    config = parse_config({"scenarios": [scenario()], "dtype": ["auto", "float32"]}, SOURCE)
    assert len(expand_cases(config, torch.device("cpu"))) == 1


def test_overrides_take_precedence_and_are_validated() -> None:
    config = parse_config({"scenarios": [scenario()], "device": "auto", "implementations": ["naive"]}, SOURCE)
    changed = with_overrides(config, device="cpu", implementations=["fused", "per_head"])
    assert (changed.device, changed.implementations) == ("cpu", ["fused", "per_head"])
    assert with_overrides(config) == config
    with pytest.raises(ConfigError, match=r"^--device: .*'gpu'"):
        with_overrides(config, device="gpu")
    with pytest.raises(UnknownImplementationError, match=r"^--impl: unknown implementation 'nope'; known: "):
        with_overrides(config, implementations=["nope"])


def test_model_dump_round_trips() -> None:
    """The manifest stores ``model_dump``; it must validate back to the same config."""
    config = parse_config(yaml.safe_load(VALID_YAML), SOURCE)
    assert RunConfig.model_validate(config.model_dump(mode="json")) == config


# --- issue 10: unknown keys first, short quotes, bounds, hostile YAML, row limits ----------------


def test_misspelled_required_key_is_named_before_the_missing_field() -> None:
    message = config_error({"scenarios": [{"seq_len": 8, "d_model": 16, "hedas": 8}]})
    assert message == f"{SOURCE}: scenarios[0].hedas: unknown field; did you mean 'heads'?"  # not "heads missing"


def file_errors(data: Any) -> list[str]:
    """Every line of the error a file with several problems gets, each checked to name the file."""
    with pytest.raises(InputError) as caught:
        parse_config(data, SOURCE)
    lines = str(caught.value).splitlines()
    assert all(line.startswith(f"{SOURCE}: ") for line in lines)
    return lines


def test_every_error_of_a_file_is_named_at_once() -> None:
    """Issue 29: two typos gave the first and "(and 3 more)"; a user fixed one, reran, met the next."""
    lines = file_errors(
        {
            "scenarios": [scenario(hedas=2, heads=2), scenario(seq_len=-1, mask="sliding_windw")],
            "implementations": ["flash"],
        }
    )
    assert lines[0] == f"{SOURCE}: scenarios[0].hedas: unknown field; did you mean 'heads'?"
    assert any(line.startswith(f"{SOURCE}: scenarios[1].seq_len:") for line in lines)
    assert any(line.startswith(f"{SOURCE}: scenarios[1].mask:") for line in lines)
    assert lines[-1].startswith(f"{SOURCE}: implementations: unknown implementation 'flash'; did you mean")


def test_a_resolved_model_config_written_back_out_parses_again() -> None:
    """Each replicate re-reads the resolved config: Gemma 2's preset window (4096) at n=64 is written out explicitly
    there, and was refused as if the user had written it (``run configs/models.yaml --replicates 3`` exited 2)."""
    resolved = parse_config({"scenarios": [{"model": "gemma-2-9b", "seq_len": 64}]}, SOURCE)
    again = parse_config(resolved.model_dump(mode="json"), SOURCE)
    assert again.scenarios[0].window == resolved.scenarios[0].window == [4096]
    config_error({"scenarios": [{"model": "gemma-2-9b", "seq_len": 64, "mask": "sliding_window", "window": 128}]})


def test_a_covering_window_is_named_beside_the_files_other_errors() -> None:
    """The window check ran first and alone: a file with it, a typo and an unknown implementation showed only it."""
    window = scenario(seq_len=64, mask="sliding_window", window=128)
    lines = file_errors({"scenarios": [{**window, "batchh": 2}], "implementations": ["fusd"]})
    assert lines[0] == f"{SOURCE}: scenarios[0].batchh: unknown field; did you mean 'batch'?"
    assert any(line.startswith(f"{SOURCE}: scenarios[0].window: 128 is not below seq_len 64") for line in lines)
    assert lines[-1].startswith(f"{SOURCE}: implementations: unknown implementation 'fusd'")
    valid_otherwise = file_errors({"scenarios": [window], "implementations": ["fusd"]})
    assert len(valid_otherwise) == 2 and "window" in valid_otherwise[0] and "'fusd'" in valid_otherwise[1]


def test_a_long_list_of_errors_stops_at_a_screenful() -> None:
    lines = file_errors({"scenarios": [scenario(seq_len=-i - 1) for i in range(30)]})
    assert len(lines) == MAX_LISTED_ERRORS + 1 and lines[-1] == f"{SOURCE}: (and 10 more)"


def test_an_unknown_implementation_suggests_the_names_it_was_meant_as() -> None:
    """Issue 29: ``implementations: [flash]`` listed every known name but no "did you mean 'flash_attn'"."""
    message = config_error({"scenarios": [scenario()], "implementations": ["flash"]}, UnknownImplementationError)
    assert message.startswith(f"{SOURCE}: implementations: unknown implementation 'flash'; did you mean ")
    assert "'flash_attn'" in message and "known:" not in message
    lines = file_errors({"scenarios": [scenario()], "implementations": ["flash", "fusd"]})
    assert len(lines) == 2 and "'fused'" in lines[1]


LIMITS = [("seq_len", 1_048_576), ("d_model", 65_536), ("batch", 65_536), ("heads", 1024), ("kv_heads", 1024)]


@pytest.mark.parametrize(("field", "limit"), LIMITS)
def test_sizes_have_upper_bounds(field: str, limit: int) -> None:
    message = config_error({"scenarios": [scenario(**{field: limit + 1})]})
    assert f"scenarios[0].{field}: Input should be less than or equal to {limit} (got {limit + 1})" in message


def test_sizes_at_their_bounds_are_accepted() -> None:
    spec = scenario(seq_len=1_048_576, batch=65_536, d_model=65_536, heads=1024, kv_heads=1024, tensor_parallel=1024)
    assert parse_config({"scenarios": [spec]}, SOURCE).scenarios[0].seq_len == [1_048_576]


def test_seed_accepts_the_whole_int64_range() -> None:
    for seed in (-(2**63), 2**63 - 1):
        assert parse_config({"scenarios": [scenario(seed=seed)]}, SOURCE).scenarios[0].seed == seed


def test_empty_sweep_list_is_refused() -> None:
    message = config_error({"scenarios": [scenario(seq_len=[])]})
    assert message == f"{SOURCE}: scenarios[0].seq_len: an empty list sweeps nothing; give at least one value"
    assert "dtype: an empty list" in config_error({"scenarios": [scenario()], "dtype": []})


@pytest.mark.parametrize("device", ["cuda:٣", "cuda:99999", "cuda:1\n"])
def test_device_index_must_be_plain_ascii_digits(device: str) -> None:
    assert f"{SOURCE}: device: " in config_error({"scenarios": [scenario()], "device": device})


# --- new settings -----------------------------------------------------------------------------


def test_new_settings_default_to_todays_behaviour() -> None:
    config = parse_config({"scenarios": [scenario()]}, SOURCE)
    assert (config.threads, config.allocator, config.isolation) == (None, "steady", "inprocess")
    assert (config.case_timeout_s, config.max_rows) == (600.0, 10_000)
    assert (config.timing.flush_l2, config.timing.cuda_graphs, config.timing.warmup_max_s) == (True, False, 1.0)
    assert config.scenarios[0].tensor_parallel == [1]


def test_new_settings_parse(tmp_path: Path) -> None:
    timing = "timing: {flush_l2: false, cuda_graphs: true, warmup_max_s: 0.5}"
    text = VALID_YAML.replace("timing: {min_run_time_s: 0.05, min_samples: 4}", timing)
    text = "threads: 1\nallocator: system\nisolation: process\ncase_timeout_s: 30\nmax_rows: 20\n" + text
    config = load_config(write(tmp_path, text))
    assert (config.threads, config.allocator, config.isolation) == (1, "system", "process")
    assert (config.case_timeout_s, config.max_rows) == (30.0, 20)
    assert (config.timing.flush_l2, config.timing.cuda_graphs, config.timing.warmup_max_s) == (False, True, 0.5)
    assert RunConfig.model_validate(config.model_dump(mode="json")) == config


BAD_SETTINGS = [("threads", 0, "0"), ("threads", "2", "'2'"), ("allocator", "jemalloc", "'jemalloc'")]
BAD_SETTINGS += [("isolation", "thread", "'thread'"), ("case_timeout_s", 0, "0"), ("max_rows", 0, "0")]


@pytest.mark.parametrize(("field", "value", "shown"), [*BAD_SETTINGS, ("max_rows", 10**12, "1000000000000")])
def test_bad_new_settings_name_field_and_value(field: str, value: Any, shown: str) -> None:
    message = config_error({"scenarios": [scenario()], field: value})
    assert message.startswith(f"{SOURCE}: {field}: ")
    assert f"(got {shown}" in message


def test_new_timing_settings_are_validated() -> None:
    assert "timing.warmup_max_s" in config_error({"scenarios": [scenario()], "timing": {"warmup_max_s": -1}})
    assert "timing.flush_l2" in config_error({"scenarios": [scenario()], "timing": {"flush_l2": "sometimes"}})


def test_tensor_parallel_must_split_heads_and_kv_heads() -> None:
    message = config_error({"scenarios": [scenario(d_model=24, heads=6, tensor_parallel=[2, 4])]})
    assert message == f"{SOURCE}: scenarios[0].tensor_parallel: heads 6 is not divisible by tensor_parallel 4"
    message = config_error({"scenarios": [scenario(d_model=48, heads=12, kv_heads=6, tensor_parallel=4)]})
    assert message == f"{SOURCE}: scenarios[0].tensor_parallel: kv_heads 6 is not divisible by tensor_parallel 4"
    message = config_error({"scenarios": [scenario(d_model=24, heads=6, kv_heads=2, tensor_parallel=3)]})
    assert message.startswith(f"{SOURCE}: scenarios[0].tensor_parallel: kv_heads 2 does not divide tensor_parallel 3")


def test_fewer_kv_heads_than_ranks_are_replicated() -> None:
    """Multi-query attention on 4 ranks: the one K/V head is replicated on every rank (issue 12)."""
    config = parse_config({"scenarios": [scenario(d_model=32, heads=8, kv_heads=[1, 2], tensor_parallel=4)]}, SOURCE)
    assert config.scenarios[0].tensor_parallel == [4]


def test_tensor_parallel_sweeps_and_marks_the_case_id_only_above_one() -> None:
    config = parse_config({"scenarios": [scenario(name="tp", d_model=32, heads=8, tensor_parallel=[1, 2, 4])]}, SOURCE)
    cases = expand_cases(config, torch.device("cpu"))
    assert [case.tensor_parallel for case in cases] == [1, 2, 4]
    assert [case.case_id for case in cases] == [f"tp/b1-n8-d32-h8{tp}-float32" for tp in ("", "-tp2", "-tp4")]
    gqa = plain_case("s", 1, 8, 32, 8, False, False, "float32", 0, kv_heads=2, tensor_parallel=2)
    assert gqa.case_id == "s/b1-n8-d32-h8-kv2-tp2-float32"


def test_command_line_max_rows_and_isolation_override_and_are_checked() -> None:
    config = parse_config({"scenarios": [scenario()]}, SOURCE)
    changed = with_overrides(config, max_rows=50_000, isolation="process")
    assert (changed.max_rows, changed.isolation) == (50_000, "process")
    with pytest.raises(ConfigError, match=r"^--max-rows: must be between 1 and 100,000,000 \(got 0\)$"):
        with_overrides(config, max_rows=0)
    with pytest.raises(ConfigError, match=r"^--isolation: must be one of inprocess, process \(got 'proc'\)$"):
        with_overrides(config, isolation="proc")


# --- issue 29: a window that covers the whole sequence ------------------------------------------


def test_a_window_not_below_seq_len_is_refused_in_one_line() -> None:
    """Issue 29: ``window: 128`` at ``seq_len: 64`` ran silently and read ``causal window=128``."""
    message = config_error({"scenarios": [scenario(seq_len=64, mask="sliding_window", window=128)]})
    assert message.startswith(f"{SOURCE}: scenarios[0].window: 128 is not below seq_len 64: ")
    assert "mask: causal" in message
    config_error({"scenarios": [scenario(seq_len=64, mask="sliding_window", window=64)]})  # equal covers it too


def test_a_swept_window_that_covers_some_lengths_runs_those_as_causal_and_says_so() -> None:
    data = {"scenarios": [scenario(name="w", seq_len=[8, 32], mask="sliding_window", window=[4, 16])]}
    config = parse_config(data, SOURCE)
    masks = {(c.seq_len, c.pattern.mask, c.pattern.window) for c in expand_cases(config, torch.device("cpu"))}
    assert masks == {
        (8, "sliding_window", 4),
        (8, "causal", None),
        (32, "sliding_window", 4),
        (32, "sliding_window", 16),
    }
    assert covered_windows(config) == [
        "scenario 'w': window 16 covers the whole sequence at n=8: run as plain causal attention"
    ]


def test_a_decode_step_sees_one_key_more_than_seq_len() -> None:
    data = {"scenarios": [scenario(seq_len=8, mask="sliding_window", window=8, phase="decode")]}
    (case,) = expand_cases(parse_config(data, SOURCE), torch.device("cpu"))
    assert (case.pattern.mask, case.pattern.window) == ("sliding_window", 8)  # 9 keys, the window drops the oldest


def test_a_quoted_number_is_refused_with_the_reason() -> None:
    """Issue 29: ``seq_len: "64"`` was refused without saying why."""
    message = config_error({"scenarios": [scenario(seq_len="64")]})
    assert message == (
        f"{SOURCE}: scenarios[0].seq_len: Input should be a valid integer "
        "(got '64'; quotes make it text in YAML: write it without them)"
    )
