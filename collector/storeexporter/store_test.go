package storeexporter

import (
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func openTestStore(t *testing.T) (*store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := openStore(dir, mustFormat(t))
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestOpeningAnEmptyDirectoryMakesAStore(t *testing.T) {
	s, dir := openTestStore(t)
	marker, err := os.ReadFile(filepath.Join(dir, "otel-llm-store.json"))
	if err != nil || !strings.Contains(string(marker), `"layout":2`) {
		t.Fatalf("marker %q (%v)", marker, err)
	}
	target, err := os.Readlink(filepath.Join(dir, "segments"))
	if err != nil || target != "generations/000000000001" {
		t.Fatalf("segments -> %q (%v)", target, err)
	}
	for _, name := range []string{".compaction.lock", ".publish.lock", "tmp",
		"generations/000000000001/.carried", "generations/000000000001/.consumed",
		"segments/00000000000000000000-schema.parquet"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n, err := s.current(); err != nil || n != 1 {
		t.Fatalf("current %d (%v)", n, err)
	}
	if _, err := openStore(dir, mustFormat(t)); err != nil { // again: nothing changes
		t.Fatal(err)
	}
	if got := names(t, filepath.Join(dir, "tmp")); len(got) != 0 {
		t.Fatalf("temporaries left: %v", got)
	}
}

func TestAForeignDirectoryOrAFirstLayoutStoreIsRefused(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	if _, err := openStore(dir, mustFormat(t)); err == nil || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("a foreign directory: %v", err)
	}
	old := t.TempDir()
	os.WriteFile(filepath.Join(old, "otel-llm-store.json"), []byte(`{"layout": 1}`), 0o644)
	os.Mkdir(filepath.Join(old, "segments"), 0o755)
	if _, err := openStore(old, mustFormat(t)); err == nil || !strings.Contains(err.Error(), "first layout") {
		t.Fatalf("a first-layout store: %v", err)
	}
}

func TestASegmentIsNamedAndPublishedIntoTheCurrentGeneration(t *testing.T) {
	s, dir := openTestStore(t)
	name, err := s.write([]byte("PAR1 not really"))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.TrimSuffix(name, ".parquet"), "-")
	if len(parts) != 4 || len(parts[0]) != 20 || parts[1] != itoa(os.Getpid()) || parts[2] != s.token || parts[3] != "000000" {
		t.Fatalf("name %q", name)
	}
	if _, err := os.Stat(filepath.Join(dir, "segments", name)); err != nil {
		t.Fatal(err)
	}
	if left := names(t, filepath.Join(dir, "tmp")); len(left) != 0 {
		t.Fatalf("temporaries left: %v", left)
	}
	for _, entry := range names(t, filepath.Join(dir, "segments")) {
		if strings.HasSuffix(entry, ".tmp") {
			t.Fatalf("a hidden link left: %s", entry)
		}
	}
}

// mergeSwitch does what a merger does at its switch: the next generation holds what the
// current one holds but the inputs it took, records them in .consumed, and becomes current.
func mergeSwitch(t *testing.T, s *store, inputs []string) {
	t.Helper()
	now, err := s.current()
	if err != nil {
		t.Fatal(err)
	}
	next := s.generationDir(now + 1)
	if err := os.Mkdir(next, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range names(t, s.generationDir(now)) {
		taken := false
		for _, input := range inputs {
			taken = taken || input == name
		}
		if strings.HasSuffix(name, ".parquet") && !taken {
			os.Link(filepath.Join(s.generationDir(now), name), filepath.Join(next, name))
		}
	}
	record, _ := json.Marshal(map[string]any{"merged": nil, "inputs": inputs})
	os.WriteFile(filepath.Join(next, ".consumed"), record, 0o644)
	if err := s.switchTo(now + 1); err != nil {
		t.Fatal(err)
	}
}

func TestAWriterFollowsAMergeThatSwitchedGenerationsUnderIt(t *testing.T) {
	s, dir := openTestStore(t)
	switched := false
	s.linked = func(number int) {
		if !switched {
			switched = true
			mergeSwitch(t, s, nil) // it looked before this segment was there
		}
	}
	name, err := s.write([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := s.current(); n != 2 {
		t.Fatalf("current %d", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "segments", name)); err != nil {
		t.Fatalf("the segment is missing from the generation the merge switched to: %v", err)
	}
}

func TestAWriterDoesNotBringBackWhatAMergeTookIn(t *testing.T) {
	s, dir := openTestStore(t)
	var name string
	s.linked = func(number int) {
		if number == 1 {
			entries := names(t, s.generationDir(1))
			for _, e := range entries {
				if strings.HasSuffix(e, ".parquet") && !strings.HasPrefix(e, "0000") {
					name = e
				}
			}
			mergeSwitch(t, s, []string{name}) // the merge took the new segment in
		}
	}
	if _, err := s.write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "segments", name)); !os.IsNotExist(err) {
		t.Fatalf("a merged-away segment came back: %v", err)
	}
}

func TestPublishingWaitsWhileAMergerSwitches(t *testing.T) {
	s, dir := openTestStore(t)
	lock, err := os.OpenFile(filepath.Join(dir, ".publish.lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.write([]byte("x")); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("published while a merger held the publish lock (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer never published after the lock was released")
	}
}

func TestTemporariesOfDeadWritersAreRemoved(t *testing.T) {
	s, dir := openTestStore(t)
	dead := filepath.Join(dir, "tmp", ".x.parquet.999999999.0123abcd.1.tmp") // no such pid
	alive := filepath.Join(dir, "tmp", ".y.parquet."+itoa(os.Getppid())+".0123abcd.1.tmp")
	young := filepath.Join(dir, "tmp", ".z.parquet.999999998.0123abcd.1.tmp")
	for _, path := range []string{dead, alive, young} {
		os.WriteFile(path, []byte("half"), 0o644)
	}
	old := time.Now().Add(-time.Minute)
	os.Chtimes(dead, old, old)
	os.Chtimes(alive, old, old)
	if n := s.removeOrphans(); n != 1 {
		t.Fatalf("removed %d", n)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Error("the dead writer's temporary stayed")
	}
	for _, path := range []string{alive, young} {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s went: %v", path, err)
		}
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestAPathWithAGlobCharacterIsRefused(t *testing.T) {
	// otel-llm's readers refuse every one of these (GLOB_CHARACTERS in _glob.py): a store the
	// Collector wrote there could not be read
	for _, c := range []string{"*", "?", "[", "]", "{", "}", `\`} {
		dir := filepath.Join(t.TempDir(), "st"+c+"ore")
		if _, err := openStore(dir, mustFormat(t)); err == nil || !strings.Contains(err.Error(), "pattern") {
			t.Errorf("%q: %v", c, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%q: the directory was made", c)
		}
	}
}

func TestAStoreThatCannotTakeAFileIsFoundAtOnce(t *testing.T) {
	s, dir := openTestStore(t)
	if err := s.checkWritable(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, filepath.Join(dir, "tmp")); len(got) != 0 {
		t.Fatalf("the probe left %v in tmp/", got)
	}
	for _, name := range names(t, filepath.Join(dir, "segments")) {
		if strings.HasSuffix(name, ".tmp") {
			t.Fatalf("the probe left %s in the generation", name)
		}
	}
	// (permissions do not stop root, who runs these tests in CI: a tmp/ that is not a directory
	// fails the same first step a read-only or another user's tmp/ does)
	os.Remove(filepath.Join(dir, "tmp"))
	os.WriteFile(filepath.Join(dir, "tmp"), nil, 0o644)
	if err := s.checkWritable(); err == nil || errNoSpace(err) {
		t.Fatalf("a tmp/ that takes no file: %v", err)
	}
	if !errNoSpace(&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}) {
		t.Fatal("a full disk is not told apart")
	}
}

func TestASegmentsLinkThatNamesNoGenerationIsPointedBack(t *testing.T) {
	for _, target := range []string{"generations/nope", "generations/000000000099", "elsewhere", ""} {
		_, dir := openTestStore(t)
		link := filepath.Join(dir, "segments")
		os.Remove(link)
		if target == "" {
			target = "generations/000000000001/" // names a generation: nothing to repair
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		s, err := openStore(dir, mustFormat(t))
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if got, _ := os.Readlink(link); got != "generations/000000000001" && got != target {
			t.Fatalf("%s: segments -> %s", target, got)
		}
		if target == "generations/000000000001/" {
			if s.repaired != "" {
				t.Fatalf("a good link was repaired: %s", s.repaired)
			}
		} else if !strings.Contains(s.repaired, target) || !strings.Contains(s.repaired, "generations/000000000001") {
			t.Fatalf("%s: %q", target, s.repaired)
		}
		if _, err := s.write([]byte("PAR1 not really")); err != nil {
			t.Fatalf("%s: %v", target, err)
		}
	}
}

func TestABrokenLinkIsLeftAloneWhileAReaderHoldsTheStore(t *testing.T) {
	_, dir := openTestStore(t)
	link := filepath.Join(dir, "segments")
	os.Remove(link)
	os.Symlink("generations/nope", link)
	reader, err := os.Open(filepath.Join(dir, ".compaction.lock")) // as otel-llm's readers hold it
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if err := syscall.Flock(int(reader.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	_, err = openStore(dir, mustFormat(t))
	if err == nil || !strings.Contains(err.Error(), `link to "generations/nope"`) ||
		!strings.Contains(err.Error(), "otel-llm compact --db") {
		t.Fatalf("%v", err)
	}
	if got, _ := os.Readlink(link); got != "generations/nope" {
		t.Fatalf("changed under a reader: %s", got)
	}
}

func TestAStorePathStartingWithATildeIsInTheHomeDirectory(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	s, err := openStore("~/otel-llm-store", mustFormat(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, "otel-llm-store"); s.path != want {
		t.Fatalf("%s, want %s", s.path, want)
	}
	if got := expandHome("~"); got != home {
		t.Fatalf("~ is %s", got)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if got := expandHome("~" + me.Username + "/x"); got != filepath.Join(me.HomeDir, "x") {
		t.Fatalf("~%s/x is %s", me.Username, got)
	}
	for _, kept := range []string{"~no-such-user-here/x", "a/~/b", "/abs/path"} {
		if got := expandHome(kept); got != kept {
			t.Fatalf("%s became %s", kept, got)
		}
	}
}
