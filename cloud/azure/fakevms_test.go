package azure

import (
	"fmt"
	"net/http"
	"strings"
)

// fakeVM is one VM of a scale set in the fake: its index and what
// eviction did to it ("" runs).
type fakeVM struct {
	index int
	state string
}

// scaleSetVMs are a scale set's VMs: as many as its capacity, the first
// baseRegularPriorityCount of them regular, the rest spot; a VM whose
// eviction ended is gone.
func (f *fakeARM) scaleSetVMs(path string) []fakeVM {
	res := f.resources[path]
	if res == nil {
		return nil
	}
	n := int(res["sku"].(map[string]any)["capacity"].(float64))
	var out []fakeVM
	for i := range n {
		if st := f.evicted[path][i]; st != "gone" {
			out = append(out, fakeVM{i, st})
		}
	}
	return out
}

// regularVMs is the scale set's regular base.
func regularVMs(res map[string]any) int {
	props, _ := res["properties"].(map[string]any)
	mix, _ := props["priorityMixPolicy"].(map[string]any)
	base, _ := mix["baseRegularPriorityCount"].(float64)
	return int(base)
}

// evict takes n of a scale set's running spot VMs back, as Azure evicts
// spot capacity: with eviction policy Delete each is first "deleting",
// then "gone" (done). The scale set's own resource is left as it was.
func (f *fakeARM) evict(path string, n int, done bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	path = strings.ToLower(path)
	res := f.resources[path]
	if res == nil {
		return 0
	}
	if f.evicted[path] == nil {
		f.evicted[path] = map[int]string{}
	}
	state, k := "deleting", 0
	if done {
		state = "gone"
	}
	for _, vm := range f.scaleSetVMs(path) {
		if k == n || vm.index < regularVMs(res) || vm.state != "" {
			continue
		}
		f.evicted[path][vm.index] = state
		k++
	}
	return k
}

// serveVMList answers VirtualMachines_List in a resource group. As the
// API says of $expand, "'instanceView' enables fetching run time status
// of all Virtual Machines, this can only be specified if a valid $filter
// option is specified", and the only $filter is "'virtualMachineScaleSet/id'
// eq" a scale set's id. Each VM is the model's VirtualMachine: priority,
// evictionPolicy, provisioningState, virtualMachineScaleSet.id and, asked
// for, instanceView.statuses with ProvisioningState/* and PowerState/*
// codes (the SDK model's VirtualMachineInstanceView).
func (f *fakeARM) serveVMList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter, expand := q.Get("$filter"), q.Get("$expand")
	m := reVMSSFilter.FindStringSubmatch(filter)
	if filter != "" && m == nil {
		armError(w, 400, "InvalidParameter", "The value of parameter $filter is invalid: "+filter)
		return
	}
	if expand != "" && (m == nil || !strings.EqualFold(expand, "instanceView")) {
		armError(w, 400, "InvalidParameter", "$expand="+expand+" needs a $filter by virtualMachineScaleSet/id")
		return
	}
	if m == nil {
		f.pageOf(w, r, "vms", nil) // no VM of the fake stands alone
		return
	}
	path := strings.ToLower(m[1])
	res := f.resources[path]
	var items []map[string]any
	for _, vm := range f.scaleSetVMs(path) {
		name := fmt.Sprintf("%s_%08x", res["name"], 0x3a0000+vm.index)
		priority, prov, power := "Spot", "succeeded", "running"
		if vm.index < regularVMs(res) {
			priority = "Regular"
		}
		if vm.state == "deleting" {
			prov, power = "deleting", "stopping"
		}
		props := map[string]any{
			"vmId": fmt.Sprintf("0000%04x-0000-4000-8000-000000000000", vm.index), "priority": priority, "evictionPolicy": "Delete",
			"provisioningState":      strings.ToUpper(prov[:1]) + prov[1:],
			"hardwareProfile":        map[string]any{"vmSize": res["sku"].(map[string]any)["name"]},
			"virtualMachineScaleSet": map[string]any{"id": res["id"]},
		}
		if expand != "" {
			props["instanceView"] = map[string]any{"statuses": []any{
				map[string]any{"code": "ProvisioningState/" + prov, "level": "Info", "displayStatus": "Provisioning " + prov},
				map[string]any{"code": "PowerState/" + power, "level": "Info", "displayStatus": "VM " + power},
			}}
		}
		items = append(items, map[string]any{
			"name": name, "type": "Microsoft.Compute/virtualMachines", "location": res["location"],
			"id":         strings.Replace(fmt.Sprint(res["id"]), "/virtualMachineScaleSets/"+fmt.Sprint(res["name"]), "/virtualMachines/"+name, 1),
			"properties": props,
		})
	}
	f.pageOf(w, r, "vms", items)
}
