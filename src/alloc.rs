//! mimalloc's options that nightshift sets (the console's purge delay).

/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (v2 and v3 alike):
/// libmimalloc-sys 0.1.49 names no constant for it. In mimalloc v3 (the
/// one built) it defaults to 1000 ms.
pub const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

#[cfg(test)]
mod tests {
    use super::*;

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
