//go:build darwin && cgo

package badtest

import (
	"testing"

	"github.com/keybase/go-keychain"
)

func TestItem(t *testing.T) {
	q := keychain.NewItem()
	q.SetServise(Name)
}
