// Package markdown parses markdown for the corpus (seed 004) and memory
// (seed 002) indexes without ever writing it:
//   - ParseLog reads a correspondence log (an OPEN_QUESTIONS.md of numbered
//     sections) into sections with their authors, date and governance tags;
//   - Split splits any markdown document into chunks by heading path
//     (H1 > H2 > …) with stable chunk keys.
//
// Both work on bytes and report byte offsets into them, so a citation can
// point at the exact excerpt.
package markdown
