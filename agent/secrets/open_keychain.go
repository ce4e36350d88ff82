//go:build darwin && cgo

package secrets

import (
	"errors"
	"fmt"

	"github.com/keybase/go-keychain"
)

// Open returns the platform's store: the login Keychain.
func Open(string) Store { return keychainStore{service: Service} }

// keychainStore uses the Keychain API directly. Items are readable after
// the first unlock and never leave this device (no iCloud sync).
type keychainStore struct{ service string }

func (keychainStore) Where() string { return "the macOS login Keychain" }

func (k keychainStore) query(key string) keychain.Item {
	q := keychain.NewItem()
	q.SetSecClass(keychain.SecClassGenericPassword)
	q.SetService(k.service)
	q.SetAccount(key)
	return q
}

func (k keychainStore) Get(key string) (string, error) {
	q := k.query(key)
	q.SetMatchLimit(keychain.MatchLimitOne)
	q.SetReturnData(true)
	res, err := keychain.QueryItem(q)
	if errors.Is(err, keychain.ErrorItemNotFound) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", keychainErr("read", err)
	}
	if len(res) == 0 {
		return "", ErrNotFound
	}
	return string(res[0].Data), nil
}

func (k keychainStore) Set(key, value string) error {
	item := k.query(key)
	item.SetData([]byte(value))
	item.SetLabel("Free Agent worker " + key)
	item.SetSynchronizable(keychain.SynchronizableNo)
	// No kSecAttrAccessible: it applies to the data protection keychain
	// only, which a Developer ID app without a provisioning profile cannot
	// use; the item goes to the login keychain, whose ACL is what decides
	// (see the package comment).
	err := keychain.AddItem(item)
	if errors.Is(err, keychain.ErrorDuplicateItem) {
		update := keychain.NewItem()
		update.SetData([]byte(value))
		err = keychain.UpdateItem(k.query(key), update)
	}
	return keychainErr("store", err)
}

func (k keychainStore) Delete(key string) error {
	err := keychain.DeleteItem(k.query(key))
	if errors.Is(err, keychain.ErrorItemNotFound) {
		return nil
	}
	return keychainErr("delete", err)
}

func keychainErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var status keychain.Error
	if errors.As(err, &status) {
		if derr := deniedError(op, err.Error(), func(s int) bool { return int(status) == s }); derr != nil {
			return derr
		}
	}
	return fmt.Errorf("could not %s the Free Agent credentials in the Keychain: %w", op, err)
}
