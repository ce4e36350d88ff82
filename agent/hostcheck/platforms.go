package hostcheck

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/agent/tart"
	"github.com/freeagent-build/freeagent/api"
)

// IDPlatforms is the check of what the worker advertises.
const IDPlatforms = "platforms"

// DefaultPlatforms is what a worker advertises when neither its owner nor
// its template says.
var DefaultPlatforms = []string{api.PlatformIOS, api.PlatformAndroid}

// Platforms decides which platforms a Tart worker advertises, and checks
// it: the owner's choice (configured, empty: none made) limited to what the
// template's marker says it builds (tart.TemplateInfoFile). Without a
// marker (an image, a template built by hand) the owner's choice stands,
// else DefaultPlatforms, with a warning: a worker that advertises a
// platform its template cannot build fails every such build.
func Platforms(d *tart.Driver, configured []string) ([]string, Result) {
	r := Result{ID: IDPlatforms}
	info, err := d.TemplateInfo()
	switch {
	case errors.Is(err, tart.ErrNoTemplateInfo) && len(configured) > 0:
		r.Severity, r.Message = OK, fmt.Sprintf("building %s, as set (template %q does not say what it builds)", strings.Join(configured, ", "), d.Template)
		return configured, r
	case errors.Is(err, tart.ErrNoTemplateInfo):
		r.Severity = Warn
		r.Message = fmt.Sprintf("template %q does not say what it builds: advertising %s", d.Template, strings.Join(DefaultPlatforms, ", "))
		r.Fix = "confirm the platforms it builds with --platforms (Preferences…, FREEAGENT_PLATFORMS), or rebuild it with scripts/build-vm-template.sh, which records them"
		return DefaultPlatforms, r
	case err != nil:
		r.Severity, r.Message, r.Fix = Fail, err.Error(), "rebuild the template with scripts/build-vm-template.sh"
		return nil, r
	}
	if len(configured) == 0 {
		configured = info.Platforms
	}
	var use, dropped []string
	for _, p := range configured {
		if slices.Contains(info.Platforms, p) {
			use = append(use, p)
		} else {
			dropped = append(dropped, p)
		}
	}
	switch {
	case len(use) == 0:
		r.Severity = Fail
		r.Message = fmt.Sprintf("template %q builds %s, none of the platforms set (%s): this worker takes no builds", d.Template, list(info.Platforms), strings.Join(configured, ", "))
		r.Fix = "set --platforms to what the template builds, or rebuild it with what you need (scripts/build-vm-template.sh --android for Android; an Xcode base image for iOS)"
	case len(dropped) > 0:
		r.Severity = Warn
		r.Message = fmt.Sprintf("template %q cannot build %s: advertising %s only", d.Template, strings.Join(dropped, ", "), strings.Join(use, ", "))
		r.Fix = "rebuild the template with what it lacks (scripts/build-vm-template.sh --android for Android; an Xcode base image for iOS), or drop it from --platforms"
	default:
		r.Severity, r.Message = OK, fmt.Sprintf("building %s (template %q builds %s)", strings.Join(use, ", "), d.Template, list(info.Platforms))
	}
	return use, r
}

func list(ps []string) string {
	if len(ps) == 0 {
		return "nothing"
	}
	return strings.Join(ps, ", ")
}
