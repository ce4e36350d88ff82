package gc_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs"
	"github.com/freeagent-build/freeagent/controller/blobs/s3blobs/s3test"
	"github.com/freeagent-build/freeagent/controller/gc"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/store"
)

func TestMain(m *testing.M) {
	os.Exit(s3test.Main(s3test.Run(func() int { return pgtest.Main(m) })))
}

// backends are the two stores the collector must clean: the file store
// and a real S3-compatible service (versitygw).
func backends(t *testing.T) map[string]func(t *testing.T) (blobs.Backend, func(t *testing.T) []string) {
	return map[string]func(t *testing.T) (blobs.Backend, func(t *testing.T) []string){
		"file": func(t *testing.T) (blobs.Backend, func(t *testing.T) []string) {
			root := t.TempDir()
			d, err := blobs.NewDir(root)
			if err != nil {
				t.Fatal(err)
			}
			// A write a killed process left: its temporary file.
			if err := os.MkdirAll(filepath.Join(root, "builds", "x"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "builds", "x", ".upload-123"), []byte("half"), 0o600); err != nil {
				t.Fatal(err)
			}
			return d, func(t *testing.T) []string {
				var out []string
				filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
					if err == nil && !e.IsDir() {
						rel, _ := filepath.Rel(root, p)
						out = append(out, filepath.ToSlash(rel))
					}
					return err
				})
				slices.Sort(out)
				return out
			}
		},
		"s3": func(t *testing.T) (blobs.Backend, func(t *testing.T) []string) {
			b := s3test.NewBucket(t)
			cfg, err := s3blobs.ParseURL(b.URL("p"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := s3blobs.Open(context.Background(), cfg, s3blobs.Options{SpoolDir: t.TempDir(), Credentials: b.Credentials()})
			if err != nil {
				t.Fatal(err)
			}
			// An upload whose process died: parts, never completed.
			core := minio.Core{Client: b.Client(t)}
			id, err := core.NewMultipartUpload(context.Background(), b.Name, "p/builds/x/attempts/a/artifact-big.apk", minio.PutObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := core.PutObjectPart(context.Background(), b.Name, "p/builds/x/attempts/a/artifact-big.apk", id, 1,
				bytes.NewReader(make([]byte, 5<<20)), 5<<20, minio.PutObjectPartOptions{}); err != nil {
				t.Fatal(err)
			}
			return s, func(t *testing.T) []string {
				var out []string
				for u := range b.Client(t).ListIncompleteUploads(context.Background(), b.Name, "", true) {
					if u.Err != nil {
						t.Fatal(u.Err)
					}
					out = append(out, "incomplete:"+u.Key)
				}
				return append(out, keys(t, s)...)
			}
		},
	}
}

func keys(t *testing.T, b blobs.Backend) []string {
	t.Helper()
	var out []string
	for info, err := range b.List(context.Background(), "") {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, info.Key)
	}
	slices.Sort(out)
	return out
}

func put(t *testing.T, b blobs.Backend, key string) {
	t.Helper()
	w, err := b.Create(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	if err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// On both stores one pass removes an expired build's artifacts and source,
// an abandoned attempt's artifact, objects no row wants, staging uploads
// and the store's own leftovers, and keeps everything a build still shows.
func TestCollectOnBothStores(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, pgtest.NewDatabase(t), store.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := st.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			backend, list := open(t)
			files, err := blobs.New(backend, bytes.Repeat([]byte{7}, 32))
			if err != nil {
				t.Fatal(err)
			}
			// Two ended builds, one long ago, each with its source and the
			// artifact of its completing attempt; the young one also holds
			// an abandoned attempt's artifact.
			for _, b := range []struct{ id, attempt string }{{"oldbuild", "oldwin"}, {"youngbuild", "youngwin"}} {
				if _, err := st.Submit(ctx, store.NewBuild{ID: b.id, Platform: "android", SourceFormat: "tar.gz", SourceSHA256: "x", SourceSize: 1,
					Commit: func() error { return nil }}); err != nil {
					t.Fatal(err)
				}
				put(t, backend, "builds/"+b.id+"/source")
				put(t, backend, "builds/"+b.id+"/attempts/"+b.attempt+"/artifact-app.apk")
			}
			put(t, backend, "builds/youngbuild/attempts/lost/artifact-app.apk")
			put(t, backend, "builds/gonebuild/source")                         // no build
			put(t, backend, "builds/youngbuild/attempts/norow/artifact-x.apk") // no row
			put(t, backend, "uploads/youngbuild/lost/0123")                    // a staging upload nobody completed
			// What the collector reads: which attempt ended each build, and
			// each attempt's artifact rows.
			pool := st.Pool()
			for _, q := range []string{
				`INSERT INTO artifacts (build_id, attempt_id, name, size, sha256) VALUES ('oldbuild', 'oldwin', 'app.apk', 1, 'x'),
					('youngbuild', 'lost', 'app.apk', 1, 'x'), ('youngbuild', 'youngwin', 'app.apk', 1, 'x')`,
				`UPDATE builds SET status = 'completed', attempt_id = CASE id WHEN 'oldbuild' THEN 'oldwin' ELSE 'youngwin' END,
					completed_at = CASE id WHEN 'oldbuild' THEN now() - interval '100 days' ELSE now() END`,
			} {
				if _, err := pool.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			time.Sleep(10 * time.Millisecond) // every object older than the (1 ns) grace
			rep, err := gc.New(st, files, gc.Config{OrphanGrace: time.Nanosecond, StagingMaxAge: time.Nanosecond, LeftoverAge: time.Nanosecond},
				logrus.New()).Collect(ctx)
			if err != nil || !rep.Ran || rep.Errors != 0 {
				t.Fatalf("collect: %+v %v", rep, err)
			}
			if rep.StrayArtifacts != 1 || rep.ExpiredArtifacts != 1 || rep.ExpiredSources != 1 || rep.Orphans != 2 || rep.Staging != 1 {
				t.Errorf("report: %+v", rep)
			}
			if rep.Leftovers != 1 {
				t.Errorf("the interrupted write (file) or the incomplete multipart upload (s3) was not removed: %+v", rep)
			}
			want := []string{"builds/youngbuild/attempts/youngwin/artifact-app.apk", "builds/youngbuild/source"}
			if got := list(t); !slices.Equal(got, want) {
				t.Fatalf("the store holds %v, want %v", got, want)
			}
		})
	}
}

// A direct upload the client gave up half way (one part of a multipart
// source upload sent, never completed) leaves nothing once a collection
// pass finds its URLs and ticket expired, although the store's own
// leftovers are not yet old enough to be swept.
func TestAbandonedDirectUploadLeavesNothing(t *testing.T) {
	ctx := context.Background()
	st, files, left := abandonedUpload(t)
	rep, err := gc.New(st, files, gc.Config{StagingMaxAge: time.Nanosecond}, logrus.New()).Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := left(); len(got) != 0 || rep.Staging != 1 || rep.Leftovers != 0 {
		t.Fatalf("after a pass: %v (report %+v)", got, rep)
	}
}

// Unfinished uploads are swept on their own short schedule, not only by
// the full pass: with the full pass an hour away, the staging sweep alone
// (a listing of uploads/) removes the abandoned upload.
func TestUnfinishedUploadsSweptBetweenFullPasses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	st, files, left := abandonedUpload(t)
	reports := make(chan gc.Report, 100)
	c := gc.New(st, files, gc.Config{StagingMaxAge: time.Nanosecond, Interval: time.Hour, StagingInterval: 10 * time.Millisecond}, logrus.New())
	c.OnRun = func(r gc.Report) { reports <- r }
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.After(time.Minute) // a bound for a loop that never sweeps, not a timing
	for {
		select {
		case r := <-reports:
			if !r.StagingOnly {
				t.Fatalf("a full pass ran: %+v", r)
			}
			if r.Staging == 0 {
				continue
			}
			if got := left(); len(got) != 0 {
				t.Fatalf("after the staging sweep: %v (report %+v)", got, r)
			}
			return
		case <-deadline:
			t.Fatalf("no staging sweep removed the abandoned upload within a minute; left: %v", left())
		}
	}
}

// abandonedUpload starts a multipart source upload on a real S3 store,
// sends its first part and leaves it; left lists what remains of it (the
// incomplete upload, any object).
func abandonedUpload(t *testing.T) (st *store.Store, files *blobs.Store, left func() []string) {
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.NewDatabase(t), store.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	b := s3test.NewBucket(t)
	cfg, err := s3blobs.ParseURL(b.URL("p"))
	if err != nil {
		t.Fatal(err)
	}
	backend, err := s3blobs.Open(ctx, cfg, s3blobs.Options{SpoolDir: t.TempDir(), Credentials: b.Credentials()})
	if err != nil {
		t.Fatal(err)
	}
	files, err = blobs.New(backend, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	// An upload of zeros, of which one part is sent.
	size := int64(api.MultipartThreshold + 1)
	sums := api.NewUploadSums(size)
	for n := size; n > 0; n -= 1 << 20 {
		sums.Write(make([]byte, min(n, 1<<20)))
	}
	decl, err := sums.Declare("source", nil)
	if err != nil {
		t.Fatal(err)
	}
	up, ok, err := files.StartSourceUpload(ctx, size, decl.SHA256, decl.PartSHA256, time.Hour)
	if err != nil || !ok || len(up.PartURLs) != 5 {
		t.Fatalf("start: %+v %v %v", up.UploadRef, ok, err)
	}
	req, _ := http.NewRequest(http.MethodPut, up.PartURLs[0], bytes.NewReader(make([]byte, up.PartSize)))
	for k, v := range up.PartHeaders[0] {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT part 1: %s", resp.Status)
	}
	left = func() []string {
		var out []string
		for u := range b.Client(t).ListIncompleteUploads(ctx, b.Name, "", true) {
			if u.Err != nil {
				t.Fatal(u.Err)
			}
			out = append(out, u.Key)
		}
		return append(out, keys(t, backend)...)
	}
	if got := left(); len(got) != 1 {
		t.Fatalf("incomplete uploads before: %v", got)
	}
	return st, files, left
}
