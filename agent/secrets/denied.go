package secrets

import (
	"errors"
	"fmt"
)

// ErrDenied is wrapped by every error for a Keychain that refused access
// (locked with no one to unlock it, a wrong password, Deny in the prompt),
// so callers such as `freeagent doctor` can tell it from other failures.
var ErrDenied = errors.New("the Keychain refused access to the Free Agent credentials")

// Keychain result codes (OSStatus, Security/SecBase.h) that mean access was
// refused. The security tool exits with the low byte of the code.
const (
	errSecUserCanceled          = -128
	errSecAuthFailed            = -25293
	errSecNoSuchKeychain        = -25294
	errSecNoDefaultKeychain     = -25307
	errSecInteractionNotAllowed = -25308
	errSecItemNotFound          = -25300
)

var deniedFixes = []struct {
	status int
	why    string
	fix    string
}{
	{errSecInteractionNotAllowed, "the login keychain is locked and nobody can be asked to unlock it (an SSH session, or before anyone logged in)",
		"log in to the Mac's desktop, or run: security unlock-keychain ~/Library/Keychains/login.keychain-db"},
	{errSecAuthFailed, "the keychain password was not accepted, or access was denied in the Keychain prompt",
		"run the command again and choose Always Allow; if the login keychain password no longer matches your login password, fix it with Keychain Access → Keychain First Aid"},
	{errSecUserCanceled, "the Keychain prompt was cancelled",
		"run the command again and choose Always Allow (or allow FreeAgent under the item's Access Control in Keychain Access, service " + Service + ")"},
	{errSecNoSuchKeychain, "this user has no login keychain",
		"create it with Keychain Access (Keychain First Aid → Repair) and log out and in again"},
	{errSecNoDefaultKeychain, "this user has no default keychain",
		"run: security default-keychain -s ~/Library/Keychains/login.keychain-db"},
}

// deniedError explains a refusal, or returns nil when status is not one.
// match compares a known code with what the caller has: the full OSStatus
// (Keychain API) or its low byte (security tool's exit status).
func deniedError(op string, detail string, match func(status int) bool) error {
	for _, d := range deniedFixes {
		if match(d.status) {
			return fmt.Errorf("%w: could not %s them because %s (%s). Fix: %s", ErrDenied, op, d.why, detail, d.fix)
		}
	}
	return nil
}

// exitStatusIs matches a security tool exit status against an OSStatus.
func exitStatusIs(exit int) func(int) bool {
	return func(status int) bool { return exit == status&0xff }
}
