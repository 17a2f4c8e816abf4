package simwire

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

// TestDriverOverTheSocket: the client reaches the served driver, its
// answers and its error codes come back as they were; with the server gone
// the client says Unavailable, and a caller that gave up gets its own
// context error, never a nil response without an error.
func TestDriverOverTheSocket(t *testing.T) {
	cloud, err := sim.New(sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(t.TempDir(), "sim.sock")
	listener, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	server := &http.Server{Handler: Handler(cloud.Driver())}
	go func() { _ = server.Serve(listener) }()
	d := Dial(socket)
	ctx := context.Background()

	// A class the sim cannot use: the driver's own error code crosses the wire.
	_, err = d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: &v1alpha1.Machine{}, MachineClass: &v1alpha1.MachineClass{}})
	want := driver.CodeOf(func() error {
		_, err := cloud.Driver().CreateMachine(ctx, &driver.CreateMachineRequest{Machine: &v1alpha1.Machine{}, MachineClass: &v1alpha1.MachineClass{}})
		return err
	}())
	if err == nil || driver.CodeOf(err) != want {
		t.Errorf("CreateMachine with a bad class over the socket: %v, want code %v as in process", err, want)
	}
	if _, err := d.ListMachines(ctx, &driver.ListMachinesRequest{MachineClass: &v1alpha1.MachineClass{}}); driver.CodeOf(err) == driver.Unavailable {
		t.Errorf("ListMachines: %v, the server was not reached", err)
	}

	_ = server.Close()
	if _, err := d.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: &v1alpha1.Machine{}}); driver.CodeOf(err) != driver.Unavailable {
		t.Errorf("GetMachineStatus without a server: %v, want Unavailable", err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	resp, err := d.GetMachineStatus(gone, &driver.GetMachineStatusRequest{Machine: &v1alpha1.Machine{}})
	if resp != nil || !errors.Is(err, context.Canceled) || driver.CodeOf(err) != driver.Canceled {
		t.Errorf("GetMachineStatus after the caller gave up: %v, %v; want no response and Canceled", resp, err)
	}
}
