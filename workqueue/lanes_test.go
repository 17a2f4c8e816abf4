package workqueue

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	kworkqueue "k8s.io/client-go/util/workqueue"
	"pgregory.net/rapid"
)

// laneOp is one call on client-go's queue built around lanes: add (first:
// AddFirst's mark before the add), get, or done.
type laneOp struct {
	add, addFirst, done string
	get                 bool
}

func TestLanesOrder(t *testing.T) {
	tests := []struct {
		name string
		ops  []laneOp
		want []string // the keys get returned, in order
	}{
		{name: "first in, first out without marks",
			ops:  []laneOp{{add: "a"}, {add: "b"}, {add: "c"}, {get: true}, {get: true}, {get: true}},
			want: []string{"a", "b", "c"}},
		{name: "a marked key passes the others",
			ops:  []laneOp{{add: "a"}, {add: "b"}, {addFirst: "c"}, {get: true}, {get: true}, {get: true}},
			want: []string{"c", "a", "b"}},
		{name: "marked keys keep their order",
			ops:  []laneOp{{add: "a"}, {addFirst: "b"}, {addFirst: "c"}, {get: true}, {get: true}, {get: true}},
			want: []string{"b", "c", "a"}},
		{name: "a waiting key is promoted once, its old place skipped",
			ops: []laneOp{{add: "a"}, {add: "b"}, {add: "c"}, {addFirst: "b"}, {addFirst: "b"},
				{get: true}, {get: true}, {get: true}},
			want: []string{"b", "a", "c"}},
		{name: "the mark ends when the key is handed out",
			ops: []laneOp{{add: "a"}, {addFirst: "b"}, {get: true}, {done: "b"}, {add: "b"},
				{get: true}, {get: true}},
			want: []string{"b", "a", "b"}},
		{name: "a key marked while processed comes back first",
			ops: []laneOp{{add: "a"}, {get: true}, {add: "b"}, {addFirst: "a"}, {done: "a"},
				{get: true}, {get: true}},
			want: []string{"a", "a", "b"}},
		{name: "a stale entry is skipped after the key came back",
			ops: []laneOp{{add: "a"}, {add: "b"}, {addFirst: "a"}, {get: true}, {done: "a"}, {add: "a"},
				{get: true}, {get: true}},
			want: []string{"a", "b", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLanes[string]()
			q := kworkqueue.NewTypedWithConfig(kworkqueue.TypedQueueConfig[string]{Queue: l})
			defer q.ShutDown()
			var got []string
			for _, op := range tt.ops {
				got = append(got, applyLaneOp(q, l, op)...)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("keys handed out (-want +got):\n%s", diff)
			}
			if n := q.Len(); n != 0 {
				t.Errorf("Len() = %d after the last key, want 0", n)
			}
		})
	}
}

func applyLaneOp(q *kworkqueue.Typed[string], l *lanes[string], op laneOp) []string {
	switch {
	case op.add != "":
		q.Add(op.add)
	case op.addFirst != "":
		l.mark(op.addFirst)
		q.Add(op.addFirst)
	case op.done != "":
		q.Done(op.done)
	case op.get:
		k, _ := q.Get()
		return []string{k}
	}
	return nil
}

// laneModel is what client-go's queue around lanes must do, written as
// plainly as possible: two lists of waiting keys, the keys being processed
// and those added again meanwhile.
type laneModel struct {
	marked      map[string]bool
	first, rest []string
	processing  map[string]bool
	again       map[string]bool
}

func (m *laneModel) waiting(k string) bool {
	return slices.Contains(m.first, k) || slices.Contains(m.rest, k)
}

func (m *laneModel) add(k string) {
	switch {
	case m.processing[k]:
		m.again[k] = true
	case m.waiting(k):
		if i := slices.Index(m.rest, k); i >= 0 && m.marked[k] {
			m.rest = slices.Delete(m.rest, i, i+1)
			m.first = append(m.first, k)
		}
	default:
		m.push(k)
	}
}

func (m *laneModel) push(k string) {
	if m.marked[k] {
		m.first = append(m.first, k)
		return
	}
	m.rest = append(m.rest, k)
}

func (m *laneModel) get() string {
	var k string
	if len(m.first) > 0 {
		k, m.first = m.first[0], m.first[1:]
		delete(m.marked, k)
	} else {
		k, m.rest = m.rest[0], m.rest[1:]
	}
	m.processing[k] = true
	return k
}

func (m *laneModel) done(k string) {
	delete(m.processing, k)
	if m.again[k] {
		delete(m.again, k)
		m.push(k)
	}
}

// TestPropertyLanesMatchModel drives client-go's queue built around lanes
// and the model with the same random calls; they must hand out the same
// keys and agree on the length all along.
func TestPropertyLanesMatchModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := newLanes[string]()
		q := kworkqueue.NewTypedWithConfig(kworkqueue.TypedQueueConfig[string]{Queue: l})
		defer q.ShutDown()
		m := &laneModel{marked: map[string]bool{}, processing: map[string]bool{}, again: map[string]bool{}}
		key := rapid.SampledFrom([]string{"a", "b", "c", "d", "e"})
		t.Repeat(map[string]func(*rapid.T){
			"add": func(t *rapid.T) {
				k := key.Draw(t, "key")
				q.Add(k)
				m.add(k)
			},
			"addFirst": func(t *rapid.T) {
				k := key.Draw(t, "key")
				l.mark(k)
				q.Add(k)
				m.marked[k] = true
				m.add(k)
			},
			"get": func(t *rapid.T) {
				if len(m.first)+len(m.rest) == 0 {
					t.Skip("nothing waits")
				}
				got, _ := q.Get()
				if want := m.get(); got != want {
					t.Fatalf("Get() = %q, want %q", got, want)
				}
			},
			"done": func(t *rapid.T) {
				var busy []string
				for k := range m.processing {
					busy = append(busy, k)
				}
				if len(busy) == 0 {
					t.Skip("nothing is processed")
				}
				slices.Sort(busy)
				k := rapid.SampledFrom(busy).Draw(t, "key")
				q.Done(k)
				m.done(k)
			},
			"": func(t *rapid.T) {
				if got, want := q.Len(), len(m.first)+len(m.rest); got != want {
					t.Fatalf("Len() = %d, want %d", got, want)
				}
			},
		})
	})
}
