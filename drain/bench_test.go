package drain

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// largeNode returns the objects of a busy node: pods in 10 namespaces
// and 10 apps each, one budget per app, every 10th pod with a volume,
// some critical, DaemonSet and ordered pods.
func largeNode(pods int) (node *corev1.Node, objs []runtime.Object) {
	node = newNode(testNode)
	objs = append(objs, node)
	for ns := range 10 {
		for a := range 10 {
			pdb := newPDB(fmt.Sprintf("app-%d", a), fmt.Sprintf("app-%d", a), 1, 4, 5, 5)
			pdb.Namespace = fmt.Sprintf("ns-%d", ns)
			objs = append(objs, pdb)
		}
	}
	for i := range pods {
		opts := []podOpt{inNamespace(fmt.Sprintf("ns-%d", i%10)), app(fmt.Sprintf("app-%d", (i/10)%10))}
		switch {
		case i%50 == 0:
			opts = append(opts, daemonSet())
		case i%25 == 0:
			opts = append(opts, critical())
		case i%7 == 0:
			opts = append(opts, order(i%3))
		}
		if i%10 == 3 {
			pv := fmt.Sprintf("pv-%d", i)
			opts = append(opts, withClaim("c-"+pv))
			pvc := newPVC("c-"+pv, pv)
			pvc.Namespace = fmt.Sprintf("ns-%d", i%10)
			objs = append(objs, pvc, newPV(pv, "vol-"+pv), newVA(pv, testNode))
		}
		objs = append(objs, newPod(fmt.Sprintf("pod-%03d", i), opts...))
	}
	return node, objs
}

func snapshotOf(node *corev1.Node, objs []runtime.Object) Snapshot {
	s := Snapshot{Node: node, Now: epoch, Claims: map[string]string{}}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Pod:
			s.Pods = append(s.Pods, o)
		case *policyv1.PodDisruptionBudget:
			s.PDBs = append(s.PDBs, o)
		case *storagev1.VolumeAttachment:
			s.VolumeAttachments = append(s.VolumeAttachments, o)
		case *corev1.PersistentVolumeClaim:
			s.Claims[o.Namespace+"/"+o.Name] = o.Spec.VolumeName
		}
	}
	return s
}

// BenchmarkDecide measures the pure planner on a 500-pod node.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{100, 500} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			node, objs := largeNode(n)
			snap := snapshotOf(node, objs)
			b.ReportAllocs()
			for b.Loop() {
				Decide(snap, Options{})
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
		})
	}
	// Every pod refused twice, with a bound of three: what counting
	// refusals in the state costs the planner.
	b.Run("pods=500/refusals", func(b *testing.B) {
		node, objs := largeNode(500)
		snap := snapshotOf(node, objs)
		snap.State.maxEvictRetries = 3
		for _, p := range snap.Pods {
			snap.State.refusals = append(snap.State.refusals, podRefusals{Pod: PodRef{Namespace: p.Namespace, Name: p.Name, UID: p.UID}, Count: 2})
		}
		b.ReportAllocs()
		for b.Loop() {
			Decide(snap, Options{})
		}
		b.ReportMetric(500*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	})
}

// BenchmarkPlan measures observe and plan of a 500-pod node through a fake
// clientset (paginated LISTs and GETs), and through listers.
func BenchmarkPlan(b *testing.B) {
	node, objs := largeNode(500)
	b.Run("api", func(b *testing.B) {
		c := newCluster(b, objs...)
		d := c.drainer(Options{})
		benchPlan(b, d, 500)
	})
	b.Run("listers", func(b *testing.B) {
		c := newCluster(b, node)
		idx := func() cache.Indexer {
			return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		}
		pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{NodeNameIndex: func(obj any) ([]string, error) {
			return []string{obj.(*corev1.Pod).Spec.NodeName}, nil
		}})
		nodes, pdbs, pvcs, pvs, vas := idx(), idx(), idx(), idx(), idx()
		for _, o := range objs {
			var err error
			switch o.(type) {
			case *corev1.Pod:
				err = pods.Add(o)
			case *corev1.Node:
				err = nodes.Add(o)
			case *policyv1.PodDisruptionBudget:
				err = pdbs.Add(o)
			case *corev1.PersistentVolumeClaim:
				err = pvcs.Add(o)
			case *corev1.PersistentVolume:
				err = pvs.Add(o)
			case *storagev1.VolumeAttachment:
				err = vas.Add(o)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		d := c.drainer(Options{Listers: Listers{
			Pods:                   pods,
			Nodes:                  corelisters.NewNodeLister(nodes),
			PodDisruptionBudgets:   policylisters.NewPodDisruptionBudgetLister(pdbs),
			PersistentVolumeClaims: corelisters.NewPersistentVolumeClaimLister(pvcs),
			PersistentVolumes:      corelisters.NewPersistentVolumeLister(pvs),
			VolumeAttachments:      vas,
		}})
		benchPlan(b, d, 500)
	})
}

// benchPlan runs the dry run of a node with the given number of pods.
func benchPlan(b *testing.B, d *Drainer, pods int) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Plan(ctx, testNode); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(pods)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
}

// BenchmarkPass measures one pass over a 500-pod node without budgets:
// observe, plan, and 500 evictions with the default concurrency. The fake
// API server accepts the evictions without changing anything (its object
// tracker, not the drain, would otherwise dominate), so every iteration
// evicts all pods again.
func BenchmarkPass(b *testing.B) {
	_, objs := largeNode(500)
	var noBudgets []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*policyv1.PodDisruptionBudget); !ok {
			noBudgets = append(noBudgets, o)
		}
	}
	c := newCluster(b, noBudgets...)
	c.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		return action.GetSubresource() == "eviction", nil, nil
	})
	d := c.drainer(Options{Volumes: VolumeOptions{Parallelism: 500}})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := d.Pass(ctx, testNode, State{})
		if err != nil {
			b.Fatal(err)
		}
		if res.Evictions == 0 {
			b.Fatalf("no evictions: %s", res.Message)
		}
	}
	b.ReportMetric(500*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
}
