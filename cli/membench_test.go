package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/internal/bytesize"
)

// TestMemoryUpload measures the expo-build process's peak RSS while it
// packs and uploads a large project to a real controller. It is opt-in
// (it writes and sends 1 GiB):
//
//	EXPO_BUILD_MEMBENCH=1 go test ./cli -run TestMemoryUpload -v -timeout 10m
//
// EXPO_BUILD_MEMBENCH_BYTES changes the size (default 1 GiB). The project is
// generated on disk as incompressible data (so the upload really is that
// large), the CLI runs as its own process (the binary built from
// cli/cmd/expo-build), and the figure is the kernel's peak resident set size
// of that process (getrusage ru_maxrss).
func TestMemoryUpload(t *testing.T) {
	if os.Getenv("EXPO_BUILD_MEMBENCH") != "1" {
		t.Skip("set EXPO_BUILD_MEMBENCH=1 to pack and upload a 1 GiB project and measure the CLI's memory")
	}
	size := int64(1 << 30)
	if v := os.Getenv("EXPO_BUILD_MEMBENCH_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		size = n
	}
	e := newEnv(t, func(l *httpapi.Limits) { l.Source = size + size/4 + 64<<20 })

	// The project: app.json and size bytes in 4 MiB files, written from a
	// 1 MiB buffer (never held whole).
	dir := project(t, map[string]string{"package.json": `{"name":"big"}`})
	start := time.Now()
	rng := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, 1<<20)
	const fileSize = 4 << 20
	for i, left := 0, size; left > 0; i++ {
		f, err := os.Create(filepath.Join(dir, "assets", fmt.Sprintf("blob-%04d.bin", i)))
		if os.IsNotExist(err) {
			os.MkdirAll(filepath.Join(dir, "assets"), 0o755)
			f, err = os.Create(filepath.Join(dir, "assets", fmt.Sprintf("blob-%04d.bin", i)))
		}
		if err != nil {
			t.Fatal(err)
		}
		n := min(left, fileSize)
		for w := int64(0); w < n; {
			chunk := buf[:min(int64(len(buf)), n-w)]
			rng.Read(chunk)
			f.Write(chunk)
			w += int64(len(chunk))
		}
		f.Close()
		left -= n
	}
	t.Logf("generated a %s project in %s", bytesize.SI(size), time.Since(start).Round(time.Millisecond))

	bin := filepath.Join(t.TempDir(), "expo-build")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "./cmd/expo-build")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build expo-build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "build", "--no-wait", dir, "--platform", "android", "--json")
	cmd.Env = append(os.Environ(), "EXPO_BUILD_CONFIG="+e.cfgPath, "EXPO_CONTROLLER_URL="+e.URL, "EXPO_CONTROLLER_API_KEY="+e.devKey)
	cmd.Stderr = os.Stderr
	stdout, _ := cmd.StdoutPipe()
	start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("expo-build build: %v\n%s", err, out)
	}
	elapsed := time.Since(start)
	var sub map[string]any
	if err := json.Unmarshal(out, &sub); err != nil {
		t.Fatalf("answer %q: %v", out, err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	peak := int64(ru.Maxrss) * 1024 // kilobytes on Linux
	if runtime.GOOS == "darwin" {
		peak = int64(ru.Maxrss) // bytes on macOS
	}
	b, err := e.admin.GetBuild(context.Background(), sub["id"].(string))
	if err != nil || b.Status != api.StatusPending {
		t.Fatalf("the build: %+v %v", b, err)
	}
	t.Logf("packed and uploaded %s (%d files) in %s (%.0f MB/s); expo-build peak RSS %.1f MiB",
		bytesize.SI(size), int(sub["files"].(float64)), elapsed.Round(time.Millisecond), float64(size)/1e6/elapsed.Seconds(), float64(peak)/(1<<20))
	if peak > 64<<20 {
		t.Errorf("peak RSS %.1f MiB exceeds 64 MiB", float64(peak)/(1<<20))
	}
}
