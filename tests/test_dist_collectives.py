"""tpu_dist collectives in 2 and 4 processes, each against gloo on CPU tensors of the same group
(tests/dist_worker.py `collectives`), plus MPMD ranks and mismatched collectives (`mpmd`)."""
import dist_harness


def test_collectives_match_gloo_2_processes(mode, tmp_path):
    out = dist_harness.launch("collectives", 2, mode, tmp_path)
    assert all("collectives ok" in o for o in out)


def test_collectives_match_gloo_4_processes(tmp_path):
    # Strict mode only: four processes cost ~20 s on this 2-core machine; the per-mode coverage of
    # the same checks is the 2-process test above.
    out = dist_harness.launch("collectives", 4, "strict", tmp_path)
    assert all("collectives ok" in o for o in out)


def test_mpmd_and_mismatched_collectives(mode, tmp_path):
    # fused is the interesting mode for MPMD (rank 0's host reads cut its graphs elsewhere);
    # debug joins under make test-dist.
    if mode == "debug":
        dist_harness.skip_unless_full(mode)
    out = dist_harness.launch("mpmd", 2, mode, tmp_path)
    assert all("mpmd ok" in o for o in out)
    # The transport and why, logged once per process although the scenario makes three groups.
    line = "tpu_dist: host (gloo) transport (the XLA CPU plugin has no cross-process collectives)"
    assert all(o.count(line) == 1 for o in out), out[0][-2000:]
    assert "missing collective raised after" in out[0]


def test_functional_collectives_in_compiled_graph(mode, tmp_path):
    # funcol.all_reduce / all_gather_tensor inside torch.compile(backend="tpu") against eager CPU/gloo;
    # the collective reads its input on the host, so the graph runs as two programs around it.
    # torch.compile is one graph runner whatever the eager mode; under make test strict only.
    dist_harness.skip_unless_full(mode)
    out = dist_harness.launch("compiled", 2, mode, tmp_path)
    assert all("compiled ok" in o for o in out)
