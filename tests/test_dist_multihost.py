"""Multi-host style: two torchrun node groups on this machine meet through a TCPStore (static
rendezvous on --master-addr/--master-port), as `torchrun --nnodes 2` does across hosts."""
import socket
import sys

import dist_harness


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_two_node_groups(mode):
    dist_harness.skip_unless_full(mode)
    port = _free_port()
    commands = [[sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
                 "--node-rank", str(node), "--master-addr", "127.0.0.1", "--master-port", str(port),
                 dist_harness.WORKER, "multinode", "env", "env", "env://"] for node in range(2)]
    out = dist_harness.launch_commands(commands, mode)
    text = "\n".join(out)
    assert "rank 0 (node 0): multinode ok" in text and "rank 1 (node 1): multinode ok" in text, text[-3000:]
