package driver

import corev1 "k8s.io/api/core/v1"

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
