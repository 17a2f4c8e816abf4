package simwire

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/mcmkit/mcm/driver"
)

// Handler serves d's operations.
func Handler(d driver.Driver) http.Handler {
	ops := map[string]func(context.Context, Request) (Response, error){
		"CreateMachine": func(ctx context.Context, r Request) (Response, error) {
			resp, err := d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: r.Machine, MachineClass: r.MachineClass, Secret: r.Secret})
			if resp == nil {
				return Response{}, err
			}
			return Response{ProviderID: resp.ProviderID, NodeName: resp.NodeName, LastKnownState: resp.LastKnownState, Addresses: resp.Addresses}, err
		},
		"InitializeMachine": func(ctx context.Context, r Request) (Response, error) {
			resp, err := d.InitializeMachine(ctx, &driver.InitializeMachineRequest{Machine: r.Machine, MachineClass: r.MachineClass, Secret: r.Secret})
			if resp == nil {
				return Response{}, err
			}
			return Response{ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: resp.Addresses}, err
		},
		"DeleteMachine": func(ctx context.Context, r Request) (Response, error) {
			resp, err := d.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: r.Machine, MachineClass: r.MachineClass, Secret: r.Secret})
			if resp == nil {
				return Response{}, err
			}
			return Response{LastKnownState: resp.LastKnownState}, err
		},
		"GetMachineStatus": func(ctx context.Context, r Request) (Response, error) {
			resp, err := d.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: r.Machine, MachineClass: r.MachineClass, Secret: r.Secret})
			if resp == nil {
				return Response{}, err
			}
			return Response{ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: resp.Addresses}, err
		},
		"ListMachines": func(ctx context.Context, r Request) (Response, error) {
			resp, err := d.ListMachines(ctx, &driver.ListMachinesRequest{MachineClass: r.MachineClass, Secret: r.Secret})
			if resp == nil {
				return Response{}, err
			}
			return Response{Machines: resp.Machines}, err
		},
		"GetVolumeIDs": func(ctx context.Context, r Request) (Response, error) {
			resp, err := d.GetVolumeIDs(ctx, &driver.GetVolumeIDsRequest{PVSpecs: r.PVSpecs})
			if resp == nil {
				return Response{}, err
			}
			return Response{VolumeIDs: resp.VolumeIDs}, err
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op, ok := ops[r.URL.Path[1:]]
		if !ok || r.Method != http.MethodPost {
			http.Error(w, "no such operation: "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		var req Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "decoding the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := op(r.Context(), req)
		if err != nil {
			resp.Code, resp.Message = driver.CodeOf(err), err.Error()
			if resp.Code == driver.OK { // CodeOf never says so for an error; keep it an error on the wire
				resp.Code = driver.Unknown
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
}
