// Package controller_test runs MCM v0.62.1's integration suite
// (pkg/test/integration/common) against mcm's reference manager, the way
// every MCM provider repository runs it from test/integration/controller.
// The framework reads its configuration from the environment (see
// ../../../README.md), starts the provider's machine-controller process
// with `make --directory=../../.. start` and MCM's
// machine-controller-manager process with
// `make --directory=../../../dev/mcm start`, and runs the specs in order.
package controller_test

import (
	"github.com/gardener/machine-controller-manager/pkg/test/integration/common"
	"github.com/onsi/ginkgo/v2"

	"github.com/mcmkit/mcm/e2e/mcmsuite/test/integration/provider"
)

// MCM's default timeout (300 s per wait) and polling interval (2 s): the
// simulated cloud boots a VM in seconds, so the waits need no more.
var commons = common.NewIntegrationTestFramework(provider.NewResourcesTracker())

var _ = ginkgo.BeforeSuite(commons.SetupBeforeSuite)

var _ = ginkgo.AfterSuite(commons.Cleanup)

var _ = ginkgo.Describe("Machine controllers test", func() {
	commons.BeforeEachCheck()
	commons.ControllerTests()
})
