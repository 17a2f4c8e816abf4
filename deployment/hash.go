package deployment

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// rolloutRelevant returns a copy of template without what does not make a new
// revision: the node template, the machine configuration and class.kind reach
// existing machines through their sets without replacing them (MCM
// propagates the same three), and the machine-template-hash label is the
// result of hashing, so it cannot be an input. template is not modified.
func rolloutRelevant(template *v1alpha1.MachineTemplateSpec) *v1alpha1.MachineTemplateSpec {
	t := template.DeepCopy()
	t.Spec.NodeTemplateSpec = v1alpha1.NodeTemplateSpec{}
	t.Spec.MachineConfiguration = nil
	t.Spec.Class.Kind = ""
	delete(t.Labels, v1alpha1.MachineTemplateHashLabelKey)
	if len(t.Labels) == 0 {
		// An empty and a missing label map are the same template.
		t.Labels = nil
	}
	return t
}

// canonicalJSON is the encoding that templates are hashed and compared by.
// encoding/json writes struct fields in declaration order and map keys
// sorted, so equal templates always give equal bytes.
func canonicalJSON(template *v1alpha1.MachineTemplateSpec) []byte {
	b, err := json.Marshal(rolloutRelevant(template))
	if err != nil {
		// Every field of a template encodes; failing here is a programming
		// error (a type that cannot be encoded was added to the API).
		panic(fmt.Sprintf("deployment: encoding a machine template: %v", err))
	}
	return b
}

// templateHash names a revision of a template, for the machine-template-hash
// label and the names of new sets. It is FNV-32a over the canonical JSON of
// the template's rollout-relevant fields, followed by the collision count
// when there is one (a collision count, even 0, gives a different hash than
// none, so bumping it always escapes a collision). The number is rendered
// with rand.SafeEncodeString, as Kubernetes renders pod-template-hash, so it
// holds no vowels that could spell words and is a valid label value.
func templateHash(template *v1alpha1.MachineTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	h.Write(canonicalJSON(template)) // a hash.Hash never fails to write
	if collisionCount != nil {
		var salt [4]byte
		binary.LittleEndian.PutUint32(salt[:], uint32(*collisionCount))
		h.Write(salt[:])
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// sameTemplate reports whether two templates are the same revision: equal
// apart from what templateHash leaves out. It decides which set is the
// deployment's new set, so it must agree with templateHash: same templates
// have the same hash for the same collision count.
func sameTemplate(a, b *v1alpha1.MachineTemplateSpec) bool {
	return bytes.Equal(canonicalJSON(a), canonicalJSON(b))
}
