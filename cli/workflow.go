package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/cli/pack"
)

// resolveWorkflow decides, once per build, whether the app's native
// project for platform is its own or made by expo prebuild on the farm,
// by eas-cli's rule (resolveWorkflowAsync): generic when a marker file of
// the native project exists and is not ignored —
// android/app/build.gradle or android/app/src/main/AndroidManifest.xml;
// ios/*.xcodeproj/project.pbxproj — else managed. "Not ignored" means the
// upload holds it (what eas-cli's VCS client promises of its ignore
// check): a native directory that git or .easignore ignores never reaches
// the farm, so the app is managed however complete it is locally.
func resolveWorkflow(uploadRoot string, project api.Project, platform string) (string, error) {
	appRoot := filepath.Join(uploadRoot, filepath.FromSlash(project.AppDir))
	markers := []string{"android/app/build.gradle", "android/app/src/main/AndroidManifest.xml"}
	if platform == api.PlatformIOS {
		ents, err := os.ReadDir(filepath.Join(appRoot, "ios"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("read the app's ios directory: %w", err)
		}
		markers = nil
		for _, e := range ents {
			if e.IsDir() && strings.HasSuffix(e.Name(), ".xcodeproj") && e.Name() != "Pods.xcodeproj" {
				markers = append(markers, "ios/"+e.Name()+"/project.pbxproj")
			}
		}
	}
	for _, m := range markers {
		uploaded, err := pack.Packs(uploadRoot, pack.Options{AppDir: project.AppDir}, path.Join(project.AppDir, m))
		if err != nil {
			return "", fmt.Errorf("decide whether %s is uploaded: %w", m, err)
		}
		if uploaded {
			return api.WorkflowGeneric, nil
		}
	}
	return api.WorkflowManaged, nil
}
