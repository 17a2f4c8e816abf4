package tolerant_test

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/tolerant"
)

// The factory replaces the generated one: controllers take their machine
// informers from it as before, and a Machine that cannot be decoded is
// reported instead of keeping them all from syncing.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, err := versioned.NewForConfig(&rest.Config{Host: "https://control-plane:6443"})
	if err != nil {
		fmt.Println(err)
		return
	}
	factory, err := tolerant.NewSharedInformerFactory(client, "shoot--dev", 0, tolerant.Options{
		Registerer: prometheus.NewRegistry(),
		Logger:     logr.Discard(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	machines := factory.Machine().V1alpha1().Machines()
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), machines.Informer().HasSynced)
}
