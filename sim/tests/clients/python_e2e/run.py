"""Runs the Python kubernetes client's own e2e tests (the `e2e_test/` beside this file, as the
package `kubernetes.e2e_test`) named on the command line, against the cluster of $KUBECONFIG.
Exits 0 when every named test passed; a skipped test counts as a failure (the cluster is there)."""

import os
import sys
import unittest

import kubernetes

kubernetes.__path__.append(os.path.dirname(os.path.abspath(__file__)))

names = ["kubernetes.e2e_test." + name for name in sys.argv[1:]]
suite = unittest.defaultTestLoader.loadTestsFromNames(names)
result = unittest.TextTestRunner(verbosity=2).run(suite)
ok = result.wasSuccessful() and not result.skipped and result.testsRun == len(names)
print("e2e: %d run, %d failed, %d errors, %d skipped" % (
    result.testsRun, len(result.failures), len(result.errors), len(result.skipped)))
sys.exit(0 if ok else 1)
