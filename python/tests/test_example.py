"""examples/levanter_lora_job.py as its README says to run it: a JAX job of 4 processes
under mpirun, and one process holding the same 16 devices. Both must print JAX's jit
refusal and check's findings, pass their own load-back checks, and export the same
adapter and merged folders, file for file and byte for byte."""

from __future__ import annotations

import pathlib

from mpi_launch import needs_mpirun, run

SCRIPT = pathlib.Path(__file__).parents[2] / "examples" / "levanter_lora_job.py"
FOLDERS = ("adapter", "merged")


def run_example(out: pathlib.Path, processes: int) -> str:
    done = run(SCRIPT, "--out", str(out), ranks=processes if processes > 1 else 0)
    assert done.returncode == 0, f"{processes} process(es):\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout


def files(folder: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@needs_mpirun
def test_the_example_job_exports_what_one_process_exports(tmp_path):
    job = run_example(tmp_path / "job", 4)
    alone = run_example(tmp_path / "alone", 1)
    for out, processes in ((job, 4), (alone, 1)):
        assert f"{processes} process(es), JAX device ids" in out, out
        assert "JAX says: Received incompatible devices for jitted computation" in out, out
        # Every array is on the TPU order, so check names each (the norms need no bytes moved).
        assert "reshard.jax.check: 16 of 16 arrays are incompatible" in out, out
        assert ("transformer.layers.stacked.self_attn.q_proj.weight [2, 4, 2, 8, 64] float32: "
                "jit (out_shardings) refuses another device order") in out, out
        assert "relabel to" in out and "moving process 0:" in out, out
        assert "jit on the natural-order mesh ran on the moved arrays" in out, out
        assert "d. load_pretrained put the merged model on a (data=2, model=8) mesh: 12 arrays" in out, out
    assert "2048" in job and "2048" not in alone  # JAX's own ids in a job
    assert job.count("e. summary") == 1  # process 0 alone prints
    for folder in FOLDERS:
        ours, theirs = files(tmp_path / "job" / folder), files(tmp_path / "alone" / folder)
        assert sorted(ours) == sorted(theirs), folder
        assert len(ours) >= 2, f"{folder}: {sorted(ours)}"
        for name in ours:
            assert ours[name] == theirs[name], f"{folder}/{name} differs between 4 processes and one"
