package driver

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// MergeSecrets returns the Secret a driver receives for a MachineClass: the
// data of secret (from the class's secretRef) merged with the data of
// credentials (from its credentialsSecretRef). Where both have a key, the
// credentials win, as in MCM, so a shared credentials secret overrides stale
// credentials left in a per-class user-data secret.
//
// Either argument may be nil. StringData, which the API server folds into
// Data on write, is folded in the same way here (it wins over Data of the
// same secret), so hand-built test secrets behave like stored ones. The
// result is a new Secret holding only Data, with copied values: the inputs
// typically come from an informer cache and stay untouched. Metadata is not
// carried over, because a merged secret has no single name.
func MergeSecrets(secret, credentials *corev1.Secret) *corev1.Secret {
	data := map[string][]byte{}
	for _, s := range []*corev1.Secret{secret, credentials} {
		if s == nil {
			continue
		}
		for k, v := range s.Data {
			data[k] = append([]byte(nil), v...)
		}
		for k, v := range s.StringData {
			data[k] = []byte(v)
		}
	}
	return &corev1.Secret{Data: data}
}

// SecretNamespace is the namespace of a class's secret reference: the
// class's own unless the reference names one.
func SecretNamespace(ref *corev1.SecretReference, class *v1alpha1.MachineClass) string {
	if ref.Namespace != "" {
		return ref.Namespace
	}
	return class.Namespace
}

// ReadClassSecret reads the secrets class references (secretRef and
// credentialsSecretRef) from secrets and merges them (MergeSecrets) into
// the Secret a driver receives for the class. It fails, naming the secret,
// when the class references none or a referenced one cannot be read. It
// does not check the user data: deleting and listing VMs need only the
// credentials.
//
// A reference into another namespace than the class's is allowed, but a
// manager that watches one namespace (the reference manager's --namespace)
// has only that namespace's Secrets in its lister, so such a secret is
// never found there even though it exists. The error then says so instead
// of a bare "not found", which would send the user looking for a Secret
// that is in place.
func ReadClassSecret(secrets corelisters.SecretLister, class *v1alpha1.MachineClass) (*corev1.Secret, error) {
	if class.SecretRef == nil && class.CredentialsSecretRef == nil {
		return nil, fmt.Errorf("MachineClass %q references no secret", class.Name)
	}
	var found [2]*corev1.Secret
	for i, ref := range []*corev1.SecretReference{class.SecretRef, class.CredentialsSecretRef} {
		if ref == nil {
			continue
		}
		ns := SecretNamespace(ref, class)
		s, err := secrets.Secrets(ns).Get(ref.Name)
		if err != nil {
			return nil, secretNotFound(ns, ref.Name, class)
		}
		found[i] = s
	}
	return MergeSecrets(found[0], found[1]), nil
}

// secretNotFound is the error for a referenced secret missing from the
// lister, with the likely cause when it is in another namespace.
func secretNotFound(ns, name string, class *v1alpha1.MachineClass) error {
	if ns == class.Namespace {
		return fmt.Errorf("Secret %s/%s referenced by MachineClass %q not found", ns, name, class.Name)
	}
	return fmt.Errorf("Secret %s/%s referenced by MachineClass %q not found: namespace %q is outside the MachineClass's namespace %q, "+
		"and a manager restricted to one namespace reads Secrets only there; put the Secret in %q",
		ns, name, class.Name, ns, class.Namespace, class.Namespace)
}
