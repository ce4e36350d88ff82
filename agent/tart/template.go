package tart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// TemplateInfoFile is the marker scripts/build-vm-template.sh leaves in a
// local template's Tart directory ($TART_HOME/vms/NAME): what the template
// was found to build. Tart ignores other files in a VM's directory, deletes
// them with the VM and moves them on rename; clones and pushes leave them
// behind, so a pulled image has none.
const TemplateInfoFile = "freeagent-template.json"

// TemplateInfo is the marker's content.
type TemplateInfo struct {
	Platforms []string `json:"platforms"`
	// XcodeVersion is the template's `xcodebuild -version` ("16.2"), ""
	// when it has no Xcode or an older script made the marker.
	XcodeVersion string `json:"xcode_version,omitempty"`
	// Tools are the template's build tools by eas.json key, every version
	// installed (freeagent-vm tools, as the template script ran it in the
	// guest; toolchain.Probe).
	Tools map[string][]string `json:"tools,omitempty"`
}

// TemplateSize is the CPU cores and memory (MB) a clone of the template
// gets unless the worker sets its own (tart get).
func (d *Driver) TemplateSize(ctx context.Context) (cpu, memoryMB int, err error) {
	out, err := d.run(ctx, "get", d.Template, "--format", "json")
	if err != nil {
		return 0, 0, err
	}
	var got struct {
		CPU    int `json:"CPU"`
		Memory int `json:"Memory"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return 0, 0, fmt.Errorf("tart get %s: %w", d.Template, err)
	}
	return got.CPU, got.Memory, nil
}

// ErrNoTemplateInfo: the template is an image, or was built by hand or by
// an older script, so what it builds is unknown.
var ErrNoTemplateInfo = errors.New("the VM template carries no " + TemplateInfoFile)

// TemplateInfo reads the template's marker.
func (d *Driver) TemplateInfo() (TemplateInfo, error) {
	var info TemplateInfo
	if IsRemote(d.Template) {
		return info, ErrNoTemplateInfo // an OCI image
	}
	home, err := d.tartHome()
	if err != nil {
		return info, err
	}
	path := filepath.Join(home, "vms", d.Template, TemplateInfoFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return info, ErrNoTemplateInfo
	}
	if err != nil {
		return info, fmt.Errorf("read the template's platforms: %w", err)
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return info, fmt.Errorf("%s: %w: rebuild the template with scripts/build-vm-template.sh", path, err)
	}
	return info, nil
}
