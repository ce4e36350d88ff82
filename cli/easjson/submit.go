package easjson

import (
	"errors"
	"fmt"
	"slices"

	"github.com/freeagent-build/freeagent/api"
)

// SubmitProfile is eas.json's submit profile for one platform, resolved
// as @expo/eas-json's resolveSubmitProfile resolves it, with the paths of
// the key files it names (relative to the project, $VARIABLES not yet
// expanded) beside the wire profile.
type SubmitProfile struct {
	api.SubmitProfile
	// ServiceAccountKeyPath (Android) and ASCAPIKeyPath, ASCAPIKeyID,
	// ASCAPIKeyIssuerID (iOS) are as eas.json writes them.
	ServiceAccountKeyPath                         string
	ASCAPIKeyPath, ASCAPIKeyID, ASCAPIKeyIssuerID string
	// AppleID is set when the profile signs in with an Apple ID, which the
	// farm does not support.
	AppleID string
}

// ResolveSubmit returns the submit profile for a platform. An empty name
// means "production", and then a missing profile is the defaults (as in
// eas-cli); a named profile that is missing is an error.
func (f *File) ResolveSubmit(platform, name string) (SubmitProfile, error) {
	if platform != api.PlatformAndroid && platform != api.PlatformIOS {
		return SubmitProfile{}, fmt.Errorf("resolve eas.json: unknown platform %q: use android or ios", platform)
	}
	explicit := name != ""
	if !explicit {
		name = "production"
	}
	section, err := f.submitSection([]string{name}, platform)
	var missing *MissingProfileError
	if errors.As(err, &missing) && !explicit {
		section, err = obj{}, nil
	}
	if err != nil {
		return SubmitProfile{}, err
	}
	str := func(k string) string { s, _ := section[k].(string); return s }
	out := SubmitProfile{SubmitProfile: api.SubmitProfile{Name: name}}
	if platform == api.PlatformAndroid {
		a := &api.AndroidSubmitProfile{ApplicationID: str("applicationId"), Track: str("track"), ReleaseStatus: str("releaseStatus")}
		if a.Track == "" {
			a.Track = "internal"
		}
		if a.ReleaseStatus == "" {
			a.ReleaseStatus = api.ReleaseCompleted
		}
		if r, ok := section["rollout"].(float64); ok {
			a.Rollout = &r
		}
		a.ChangesNotSentForReview, _ = section["changesNotSentForReview"].(bool)
		out.Android, out.ServiceAccountKeyPath = a, str("serviceAccountKeyPath")
		return out, nil
	}
	i := &api.IOSSubmitProfile{AscAppID: str("ascAppId"), BundleIdentifier: str("bundleIdentifier"), AppleTeamID: str("appleTeamId")}
	if g, ok := section["groups"].([]any); ok {
		for _, v := range g {
			if s, ok := v.(string); ok {
				i.Groups = append(i.Groups, s)
			}
		}
	}
	out.IOS = i
	out.ASCAPIKeyPath, out.ASCAPIKeyID, out.ASCAPIKeyIssuerID, out.AppleID = str("ascApiKeyPath"), str("ascApiKeyId"), str("ascApiKeyIssuerId"), str("appleId")
	return out, nil
}

// submitSection resolves the platform section of the last submit profile
// of chain: a profile's section over the one it extends, key by key.
func (f *File) submitSection(chain []string, platform string) (obj, error) {
	name := chain[len(chain)-1]
	if len(chain) > maxExtends {
		return nil, &ExtendsChainError{Chain: chain}
	}
	submit, _ := f.doc["submit"].(obj)
	profile, ok := submit[name].(obj)
	if !ok {
		if len(chain) == 1 {
			var names []string
			for n := range submit {
				names = append(names, n)
			}
			slices.Sort(names)
			return nil, &MissingProfileError{Name: name, Available: names, Kind: "submit"}
		}
		return nil, fmt.Errorf("eas.json: submit profile %q extends %q, which does not exist: fix \"extends\" or add a %q submit profile", chain[len(chain)-2], name, name)
	}
	own, _ := profile[platform].(obj)
	parent, _ := profile["extends"].(string)
	if parent == "" {
		return own, nil
	}
	base, err := f.submitSection(append(chain[:len(chain):len(chain)], parent), platform)
	if err != nil {
		return nil, err
	}
	out := obj{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range own {
		out[k] = v
	}
	return out, nil
}
