import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** Top-level folders of the checkout whose files the docs name by path. */
const ROOTS = ['router', 'replica', 'common', 'operator', 'cli', 'harness', 'bench', 'native', 'test', 'helm', 'crds', 'examples', 'deploy', 'docs'];

/** `router/exchange/exchange.ts`, `harness/` left out: a path ends in a name; `dist/router/…` is a build output, not matched. */
const PATH = new RegExp(`(?<![\\w./@-])((?:${ROOTS.join('|')})/[\\w./-]*\\w)`, 'g');

/** Paths from the repository root that `text` names. */
export function repositoryPaths(text: string): string[] {
  return [...text.matchAll(PATH)].map((m) => m[1] ?? '');
}

/** Targets of the page's relative Markdown links (`[x](../bench/README.md#y)`, not in code) that the checkout lacks. */
export function brokenLinks(page: string, text: string): string[] {
  const prose = text.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)#\s]+)(?:#[^)\s]*)?\)/g)].map((m) => m[1] ?? '').filter((target) => !/^[a-z]+:/.test(target) && !existsSync(join(dirname(page), target)));
}
