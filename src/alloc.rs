//! How the console holds memory: mimalloc's options that nightshift sets
//! (the console's purge delay), and no transparent huge pages.

/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (v2 and v3 alike):
/// libmimalloc-sys 0.1.49 names no constant for it. In mimalloc v3 (the
/// one built) it defaults to 1000 ms.
pub const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Takes no transparent huge pages for this process from now on, unless
/// `MIMALLOC_ALLOW_THP` is set (the user's say). A 2 MiB page stays
/// resident while any byte of it is live, and the console frees about a
/// thousand node copies a second at 10,000 nodes, all over its heap:
/// with Debian's default (`madvise`) its peak was 296–304 MB, without
/// 267–275 MB, the same CPU (docs/performance.md). Whether it took
/// effect, where the kernel says.
pub fn no_huge_pages() -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
            return None;
        }
        // SAFETY: prctl with PR_SET_THP_DISABLE and PR_GET_THP_DISABLE
        // takes integer arguments only and sets or reads one flag of this
        // process's memory map.
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
            Some(libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1)
        }
    }
    #[cfg(not(target_os = "linux"))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process takes no huge pages after the call: the kernel's own
    /// flag reads back set.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_console_takes_no_huge_pages() {
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
            return;
        }
        assert_eq!(no_huge_pages(), Some(true));
        // SAFETY: reads one flag of this process's memory map.
        assert_eq!(
            unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) },
            1
        );
    }

    /// The number is the option it stands for: mimalloc v3's default purge
    /// delay is 1000 ms (no other option of its defaults to 1000), and it
    /// reads back what is set.
    #[test]
    fn purge_delay_is_mimallocs_purge_delay() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reads and sets one of mimalloc's options.
        unsafe {
            assert_eq!(libmimalloc_sys::mi_option_get(PURGE_DELAY), 1000);
            libmimalloc_sys::mi_option_set(PURGE_DELAY, 0);
            assert_eq!(libmimalloc_sys::mi_option_get(PURGE_DELAY), 0);
            libmimalloc_sys::mi_option_set(PURGE_DELAY, 1000);
        }
    }
}
