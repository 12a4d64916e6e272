import { readdirSync } from 'node:fs';

/** The pages a reader meets: README, the programs' READMEs and docs/ (ADRs keep their time's words). */
export const DOC_PAGES: readonly string[] = [
  'README.md',
  'router/README.md',
  'replica/README.md',
  ...readdirSync('docs')
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
