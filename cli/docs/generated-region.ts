/**
 * A generated part of a hand-written page sits between two HTML comments, which Markdown
 * renders as nothing:
 *
 *   <!-- generated: NAME (`npm run docs`; do not edit, a unit test fails on drift) -->
 *   …
 *   <!-- end generated: NAME -->
 */

const begin = (name: string): RegExp => new RegExp(`^<!-- generated: ${name} [^\\n]*-->\\n`, 'm');
const end = (name: string): string => `<!-- end generated: ${name} -->`;

/** The page with the region `name` holding `body`; throws when the page lacks the markers, so a moved region is noticed. */
export function fillRegion(page: string, name: string, body: string): string {
  const start = begin(name).exec(page);
  if (start === null) throw new Error(`no "<!-- generated: ${name} … -->" line`);
  const from = start.index + start[0].length;
  const to = page.indexOf(end(name), from);
  if (to === -1) throw new Error(`no "${end(name)}" line after "<!-- generated: ${name} … -->"`);
  return page.slice(0, from) + body + page.slice(to);
}
