// ESLint (flat config) for the dashboard: the recommended rules, the
// rules of hooks, browser globals for src/ and Node's for the build script
// and the browser tests. Run by scripts/check-format with Prettier.
import js from '@eslint/js';
import globals from 'globals';
import reactHooks from 'eslint-plugin-react-hooks';

export default [
	{ ignores: ['dist/', 'node_modules/'] },
	js.configs.recommended,
	{
		files: ['**/*.{js,jsx,mjs}'],
		languageOptions: {
			ecmaVersion: 2022,
			sourceType: 'module',
			parserOptions: { ecmaFeatures: { jsx: true } },
		},
		plugins: { 'react-hooks': reactHooks },
		rules: {
			'react-hooks/rules-of-hooks': 'error',
			// components are used as JSX (<Badge />), which plain ESLint does not count as a use
			'no-unused-vars': ['error', { varsIgnorePattern: '^[A-Z]', args: 'after-used', ignoreRestSiblings: true }],
			eqeqeq: ['error', 'always'],
			'no-var': 'error',
			'prefer-const': 'error',
		},
	},
	{ files: ['src/**'], languageOptions: { globals: globals.browser } },
	{ files: ['build.mjs', 'eslint.config.js'], languageOptions: { globals: globals.node } },
	// the browser tests run in Node and hand functions to the page (page.evaluate)
	{ files: ['tests/**'], languageOptions: { globals: { ...globals.node, ...globals.browser } } },
];
