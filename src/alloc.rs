//! The process's allocator: jemalloc, for every binary that links kcm (the tests' too).
//!
//! glibc's allocator was the largest single cost of the API path: a pod created through the
//! apiserver allocates and frees thousands of small blocks of many sizes (JSON values, maps,
//! field sets) between larger ones (bodies, encoded objects), and each larger request made
//! glibc consolidate its free lists first. A quarter of the bench process's CPU went there
//! in `kcm bench scale-up --api`; docs/PERFORMANCE.md has the profile and the rows before and
//! after.
//!
//! Two things kcm asks of the allocator itself: how many bytes are in use (the bench's
//! memory figures) and to give freed memory back to the system at once (the apiserver after
//! large bodies, which would otherwise keep them until jemalloc's decay returns them).

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its start (`_RJEM_MALLOC_CONF` in the environment overrides
/// them): one arena. With its default of four per core, each thread's frees stayed in the
/// arena it allocated from, and the controller manager at 100,000 pods peaked at 52 MiB
/// against glibc's 39; one arena peaked at 45, at no cost in the API rows' throughput
/// measured (each thread's cache takes most requests without the arena's lock).
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: Options = Options(c"narenas:1".as_ptr());

/// A C string jemalloc reads as its `malloc_conf` (a `const char *`).
#[repr(transparent)]
struct Options(*const std::ffi::c_char);

// SAFETY: the pointer is to a string literal, never written.
unsafe impl Sync for Options {}

/// The bytes the allocator has handed out and not had back, at this moment; `None` if
/// jemalloc cannot say.
pub fn allocated() -> Option<usize> {
    // The counters are a snapshot, refreshed by advancing the epoch.
    tikv_jemalloc_ctl::epoch::advance().ok()?;
    tikv_jemalloc_ctl::stats::allocated::read().ok()
}

/// Returns the pages freed memory holds in every arena to the system now, rather than
/// after jemalloc's decay (10 s of allocator activity).
pub fn give_back() {
    // `arena.<MALLCTL_ARENAS_ALL>.purge` takes no argument and returns nothing.
    const PURGE_ALL: &[u8] = b"arena.4096.purge\0";
    // SAFETY: the name is NUL-terminated, and a control that reads and writes nothing is
    // called with null pointers and zero lengths, as jemalloc requires.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}

#[cfg(test)]
mod tests {
    /// The counters follow an allocation, and a purge leaves allocated memory alone.
    #[test]
    fn allocated_bytes_follow_an_allocation_and_survive_a_purge() {
        let before = super::allocated().expect("jemalloc's stats");
        // Large against what the other tests, running at the same time, allocate and free.
        let block = vec![1u8; 256 << 20];
        let during = super::allocated().expect("jemalloc's stats");
        assert!(
            during >= before + (192 << 20),
            "{before} → {during} bytes with 256 MiB more allocated"
        );
        super::give_back();
        assert!(
            block.iter().all(|&b| b == 1),
            "a purge changed memory in use"
        );
        drop(block);
        let after = super::allocated().expect("jemalloc's stats");
        assert!(
            after + (192 << 20) < during,
            "{during} → {after} bytes after freeing 256 MiB"
        );
    }
}
