"""Signal handlers that user code installs run in user code: a signal that arrives
between execs is handled as the next exec starts, never in the runner's own frames."""

import os
import signal
import time
import unittest

from harness import RunnerTestCase


class UserSignalTest(RunnerTestCase):
    def test_a_signal_between_execs_is_handled_in_the_next_exec(self):
        self.assertEqual(self.client.exec(
            "import signal\n"
            "def boom(signum, frame):\n    raise ValueError(f'signal {signum}')\n"
            "signal.signal(signal.SIGUSR1, boom)").status, "ok")
        os.kill(self.proc.pid, signal.SIGUSR1)
        time.sleep(0.2)
        res = self.client.exec("1 + 1")
        self.assertEqual(res.status, "error", res.result)
        self.assertEqual(res.error["message"], f"signal {int(signal.SIGUSR1)}")
        self.assertEqual(self.client.exec("1 + 1").result, "2")

    def test_a_handler_of_its_own_is_left_alone(self):
        res = self.client.exec(
            "import os, signal\nseen = []\n"
            "signal.signal(signal.SIGUSR2, lambda signum, frame: seen.append(signum))\n"
            "os.kill(os.getpid(), signal.SIGUSR2)\nimport time\ntime.sleep(0.05)\n"
            "(seen, signal.getsignal(signal.SIGUSR2).__name__)")
        self.assertEqual(res.result, f"([{int(signal.SIGUSR2)}], '<lambda>')")
        self.assertEqual(self.client.exec("signal.getsignal(signal.SIGUSR2).__name__").result,
                         "'<lambda>'")


if __name__ == "__main__":
    unittest.main()
