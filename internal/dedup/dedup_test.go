package dedup

import "testing"

func TestFirst(t *testing.T) {
	var m Messages
	steps := []struct {
		key, msg string
		forget   bool
		want     bool
	}{
		{key: "a", msg: "frozen", want: true},
		{key: "a", msg: "frozen", want: false},
		{key: "b", msg: "frozen", want: true},
		{key: "a", msg: "frozen by the gate", want: true},
		{key: "a", forget: true},
		{key: "a", msg: "frozen by the gate", want: true},
	}
	for i, s := range steps {
		if s.forget {
			m.Forget(s.key)
			continue
		}
		if got := m.First(s.key, s.msg); got != s.want {
			t.Errorf("step %d: First(%q, %q) = %v, want %v", i, s.key, s.msg, got, s.want)
		}
	}
}
