package mcmdriver_test

import (
	"context"
	"fmt"

	mcm "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/mcmdriver"
)

// ExampleNew puts MCM's own fake driver, which stands for one VM, behind
// our interface and creates that VM.
func ExampleNew() {
	ctx := context.Background()
	d := mcmdriver.New(mcm.NewFakeDriver(false, "fake:///vm-1", "node-1", "booted", nil, nil, nil))
	req := &driver.CreateMachineRequest{
		Machine:      &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m-1", Namespace: "shoot"}},
		MachineClass: &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: "shoot"}},
		Secret:       &corev1.Secret{Data: map[string][]byte{"userData": []byte("#cloud-config")}},
	}
	resp, err := d.CreateMachine(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.ProviderID, resp.NodeName, resp.LastKnownState)
	// Output: fake:///vm-1 node-1 booted
}

// ExampleErrorFromMCM shows how an MCM provider's error reaches our
// controller: its machine code becomes ours, its message is kept.
func ExampleErrorFromMCM() {
	err := mcmdriver.ErrorFromMCM(fmt.Errorf("run instances: %w", status.Error(codes.ResourceExhausted, "no m5.large left in eu-1a")))
	fmt.Println(driver.CodeOf(err))
	fmt.Println(err)
	// Output:
	// ResourceExhausted
	// ResourceExhausted: no m5.large left in eu-1a
}
