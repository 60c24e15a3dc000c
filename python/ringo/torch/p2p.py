# p2p.py — the sends and receives of a ringo process group, collected into one batch that starts, as
# one ringo group, when one of its works is waited on or the group is called for anything else.
# Tested by python/tests/test_torch_p2p.py and, under torchrun, python/tests/workers/collectives.py.
#
# Why they wait: ringo's send of a message larger than the link's FIFO returns only once the peer
# receives it, and the group's worker runs one call at a time. Started one by one, isend(next) then
# irecv(prev) on every rank of a ring would each wait for a receive queued behind the other rank's
# send. Gloo's sends progress on their own; NCCL asks for a group around them. Collected until
# someone needs their result, any exchange pattern progresses together, as batch_isend_irecv's
# coalescing does (torch before 2.12 coalesces only its own ProcessGroup class, not ours).
from torch._C._distributed_c10d import Work


class P2PBatch:
    """Sends (peer, bytes) and receives (peer, tensor) on one device, and, once started, the Work
    of the ringo group that runs them all."""

    def __init__(self, device, start):
        self.device = device
        self.sends, self.recvs = [], []
        self.work = None
        self._start = start  # the group's start(batch): sets work

    def started(self):
        """The batch's Work, starting the batch first if nobody has yet."""
        if self.work is None:
            self._start(self)
        return self.work


class P2PWork(Work):
    """The Work of one send or receive of a batch: every question about it starts the batch, then
    asks the batch's Work. The batch's Work completes when all of its sends and receives have."""

    def __init__(self, batch, outputs):
        super().__init__()
        self._batch = batch
        self._outputs = outputs

    def _work(self):
        return self._batch.started()

    def wait(self, timeout=None):
        return self._work().wait(timeout)

    def synchronize(self):
        self._work().synchronize()

    def is_completed(self):
        return self._work().is_completed()

    def is_success(self):
        return self._work().is_success()

    def exception(self):
        return self._work().exception()

    def result(self):
        self._work().result()
        return self._outputs

    def _own_outputs(self, fut):
        fut.value()  # raises the batch's error into the future this callback makes
        return self._outputs

    def get_future(self):
        return self._work().get_future().then(self._own_outputs)
