//! Word wrap with a hanging indent for the engine's answers.

use ratatui::text::{Line, Span};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Word-wraps `lines` at `width` with a hanging indent, so that a wrapped
/// verdict or bullet continues under its own text, not at the margin. A
/// line's indent is its first span when that is a label or padding
/// (ends in a space), plus a leading `· ` bullet. Words longer than a line
/// are split.
pub fn hang(lines: Vec<Line<'static>>, width: u16) -> Vec<Line<'static>> {
    let width = usize::from(width.max(1));
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        if line.width() <= width {
            out.push(line);
            continue;
        }
        let spans = &line.spans;
        let mut indent = match spans.first() {
            Some(s) if spans.len() > 1 && s.content.ends_with(' ') => s.content.width(),
            _ => s_leading(spans.first().map_or("", |s| &s.content)),
        };
        if let Some(next) = spans.get(usize::from(spans.len() > 1 && indent > 0)) {
            let body = next.content.trim_start();
            if body.starts_with("· ") {
                indent += next.content.len() - body.len() + 2;
            }
        }
        // Leave a reasonable line for the text.
        if indent + 10 > width {
            indent = 0;
        }
        let mut cur: Vec<Span<'static>> = Vec::new();
        let mut cur_w = 0usize;
        let flush = |cur: &mut Vec<Span<'static>>, out: &mut Vec<Line<'static>>| {
            out.push(Line::from(std::mem::take(cur)).style(line.style));
        };
        for span in spans {
            // Words with the spaces after them, in the span's style.
            let mut rest: &str = &span.content;
            while !rest.is_empty() {
                let end = rest
                    .char_indices()
                    .skip_while(|(_, c)| c.is_whitespace())
                    .find(|(_, c)| c.is_whitespace())
                    .map_or(rest.len(), |(i, _)| i);
                let end = rest[end..]
                    .char_indices()
                    .find(|(_, c)| !c.is_whitespace())
                    .map_or(rest.len(), |(i, _)| end + i);
                let (word, tail) = rest.split_at(end);
                rest = tail;
                let mut word = word.to_string();
                loop {
                    let w = word.trim_end().width();
                    if cur_w + w <= width {
                        if cur_w + word.width() > width {
                            // Spaces at the end of a line are not drawn.
                            word.truncate(word.trim_end().len());
                        }
                        cur_w += word.width();
                        cur.push(Span::styled(word, span.style));
                        break;
                    }
                    if cur_w > indent {
                        flush(&mut cur, &mut out);
                        cur.push(Span::raw(" ".repeat(indent)));
                        cur_w = indent;
                        continue;
                    }
                    // Longer than a whole line: split it.
                    let room = width.saturating_sub(cur_w).max(1);
                    let mut cut = 0;
                    let mut cw = 0;
                    for (i, c) in word.char_indices() {
                        let cwid = UnicodeWidthChar::width(c).unwrap_or(0);
                        if cw + cwid > room {
                            break;
                        }
                        cw += cwid;
                        cut = i + c.len_utf8();
                    }
                    let cut = cut.max(word.chars().next().map_or(0, char::len_utf8));
                    let rest_word = word.split_off(cut);
                    cur.push(Span::styled(word, span.style));
                    flush(&mut cur, &mut out);
                    cur.push(Span::raw(" ".repeat(indent)));
                    cur_w = indent;
                    word = rest_word;
                    if word.is_empty() {
                        break;
                    }
                }
            }
        }
        if !cur.is_empty() {
            flush(&mut cur, &mut out);
        }
    }
    out
}

/// Columns of leading spaces.
fn s_leading(s: &str) -> usize {
    s.len() - s.trim_start_matches(' ').len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn bullets_continue_under_their_text() {
        let line = Line::from(vec![
            Span::raw("              "),
            Span::raw(
                "· Xid 63 (ECC page retirement or row remapping recording event) at 02:50:10",
            ),
        ]);
        let out = text(&hang(vec![line], 60));
        assert_eq!(
            out,
            [
                "              · Xid 63 (ECC page retirement or row remapping",
                "                recording event) at 02:50:10"
            ]
        );
        let line = Line::from(vec![
            Span::raw("verdict       "),
            Span::raw("drain the node, then reset the GPU because it has fallen off the bus"),
        ]);
        let out = text(&hang(vec![line], 40));
        assert_eq!(out[0], "verdict       drain the node, then reset");
        assert_eq!(out[1].trim_end(), "              the GPU because it has");
        assert!(
            out.iter().skip(1).all(|l| l.starts_with("              ")),
            "{out:?}"
        );
    }

    proptest! {
        /// No line is wider than asked and no character is lost, for any
        /// words, spaces and widths (wide characters included).
        #[test]
        fn fits_and_loses_nothing(words in proptest::collection::vec("[a-z界·]{0,30}", 0..20), label in 0usize..20, width in 1u16..90) {
            let line = Line::from(vec![Span::raw(" ".repeat(label)), Span::raw(words.join(" "))]);
            let out = hang(vec![line.clone()], width);
            for l in &out {
                prop_assert!(l.width() <= usize::from(width).max(2), "{:?} wider than {width}", l);
            }
            let squash = |ls: &[Line]| -> String { text(ls).concat().chars().filter(|c| !c.is_whitespace()).collect() };
            prop_assert_eq!(squash(&out), squash(&[line]));
        }
    }
}
