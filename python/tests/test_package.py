"""The package imports, and its exceptions are wired to the C++ error codes."""

import pytest

import reshard
from reshard import errors


def test_every_error_code_has_its_class():
    names = reshard._core._error_code_names()
    by_code = errors._BY_CODE
    assert sorted(by_code) == sorted(names)
    for name in names:
        assert issubclass(by_code[name], errors.ReshardError)
        assert by_code[name].code == name


def test_layout_errors_are_value_errors_and_io_errors_are_os_errors():
    assert issubclass(errors.IndivisibleError, ValueError)
    assert issubclass(errors.UnknownAxisError, errors.LayoutError)
    assert issubclass(errors.ReshardIOError, OSError)
    assert issubclass(errors.MissingTensorError, KeyError)


def test_a_cpp_error_arrives_with_its_class_and_message():
    with pytest.raises(errors.ParseError, match="unknown memory kind 'nowhere'"):
        reshard.NamedSharding(reshard.Mesh([0], ("x",)), reshard.P(), "nowhere")


def test_the_checked_in_type_stub_matches_the_extension(tmp_path):
    import pathlib
    import subprocess
    import sys

    out = tmp_path / "_core.pyi"
    subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-m", "reshard._core", "-P", "-o", str(out)],
                   check=True)
    checked_in = pathlib.Path(reshard.__file__).with_name("_core.pyi").read_text()
    body = "".join(line for line in checked_in.splitlines(keepends=True) if not line.startswith("#"))
    assert body == out.read_text(), "regenerate python/reshard/_core.pyi (command at its top)"


def test_every_public_item_has_a_docstring():
    import inspect

    import reshard.jax
    import reshard.mpi
    import reshard.orbax

    modules = [reshard, reshard.errors, reshard.safetensors, reshard.array, reshard.jax, reshard.checkpoint,
               reshard.pipelines, reshard.mpi, reshard.orbax]
    missing = []
    for module in modules:
        names = getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")])
        for name in names:
            item = getattr(module, name)
            if inspect.ismodule(item) or not callable(item) and not isinstance(item, type):
                continue
            if not (item.__doc__ or "").strip():
                missing.append(f"{module.__name__}.{name}")
            if isinstance(item, type):
                for attr, value in vars(item).items():
                    if attr.startswith("_") or not (callable(value) or isinstance(value, property) or hasattr(value, "__get__")):
                        continue
                    if not (getattr(value, "__doc__", None) or "").strip():
                        missing.append(f"{module.__name__}.{name}.{attr}")
    assert not missing, missing
