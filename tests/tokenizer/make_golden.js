// Writes the golden files that src/tokenizer/*golden_test.cc compares Mosaic's tokenizer with.
// The reference is Hugging Face tokenizers (Rust, 0.22) through its Node bindings, an
// implementation independent of ours. Run it after changing texts.json or the fixtures:
//
//   tests/tokenizer/fetch_tokenizers.sh            # real tokenizer.json files into the cache
//   cd tests/tokenizer && npm ci && node make_golden.js [cache_dir]
//
// Outputs (all small, all committed):
//   golden_qwen3.json, golden_llama3.json   ids and decoded text for every text in texts.json
//   tiny_gpt2.tokenizer.json, tiny_nfkc.tokenizer.json
//                                           small tokenizers cut from the Qwen3 vocabulary that
//                                           exercise what the real files do not (added-token
//                                           flags, TemplateProcessing, "a b" merges, ...)
//   golden_tiny_gpt2.json, golden_tiny_nfkc.json
//   golden_pre_tokenizers.json              pieces of each Split behaviour and ByteLevel setting
//   golden_normalizers.json                 NFC/NFD/NFKC/NFKD/Sequence outputs
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('@anush008/tokenizers');

const here = __dirname;
const repoRoot = path.resolve(here, '..', '..');
const cacheDir = process.argv[2] || process.env.MOSAIC_TOKENIZER_DIR ||
    process.env.MOSAIC_TOKENIZER_CACHE || path.join(repoRoot, '.cache', 'tokenizers');
const generator = '@anush008/tokenizers@0.6.0 (Hugging Face tokenizers 0.22.2)';

const corpus = JSON.parse(fs.readFileSync(path.join(here, 'texts.json'), 'utf8'));

// Scalars first, then each array with one element per line: diffable without being huge.
function writeGoldenFile(file, scalars, arrays) {
  const entry = (key, value) => `${JSON.stringify(key)}: ${value}`;
  const parts = Object.entries(scalars).map(([key, value]) => entry(key, JSON.stringify(value)));
  for (const [key, rows] of Object.entries(arrays)) {
    parts.push(entry(key, `[\n${rows.map((row) => JSON.stringify(row)).join(',\n')}\n]`));
  }
  fs.writeFileSync(path.join(here, file), `{\n${parts.join(',\n')}\n}\n`);
  const counts = Object.entries(arrays).map(([key, rows]) => `${rows.length} ${key}`).join(', ');
  console.log(`wrote ${file} (${counts})`);
}

async function encodeCases(tokenizer, texts) {
  const cases = [];
  for (const text of texts) {
    const plain = await tokenizer.encode(text, null, { addSpecialTokens: false });
    const special = await tokenizer.encode(text, null, { addSpecialTokens: true });
    cases.push({
      text,
      ids: plain.getIds(),
      ids_with_special: special.getIds(),
      decoded: await tokenizer.decode(plain.getIds(), false),
      decoded_with_special: await tokenizer.decode(special.getIds(), false),
      decoded_skip_special: await tokenizer.decode(special.getIds(), true),
    });
  }
  return cases;
}

// Every proper prefix of a text's ids, decoded: this is where a decoder meets cut UTF-8.
async function prefixDecodeCases(tokenizer, texts) {
  const cases = [];
  for (const text of texts) {
    const ids = (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
    for (let n = 1; n < ids.length; ++n) {
      const prefix = ids.slice(0, n);
      cases.push({ ids: prefix, text: await tokenizer.decode(prefix, false) });
    }
  }
  return cases;
}

async function writeGolden(name, file, tokenizer, texts, prefixTexts) {
  const sha256 = crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
  const cases = await encodeCases(tokenizer, texts);
  const decodeCases = await prefixDecodeCases(tokenizer, prefixTexts);
  writeGoldenFile(`golden_${name}.json`, { tokenizer: name, sha256, generator },
      { cases, decode_cases: decodeCases });
}

// A small tokenizer: the 256 byte symbols and the first `mergeCount` merges of Qwen3 (whose ids
// are 256 + merge rank, so the cut is self-consistent), with the given pipeline around it.
function cutFromQwen(qwen, mergeCount, mergesAsStrings, pipeline) {
  const limit = 256 + mergeCount;
  const vocab = {};
  for (const [token, id] of Object.entries(qwen.model.vocab)) {
    if (id < limit) vocab[token] = id;
  }
  let merges = qwen.model.merges.slice(0, mergeCount);
  if (mergesAsStrings) merges = merges.map((pair) => `${pair[0]} ${pair[1]}`);
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: pipeline.added_tokens.map((token, index) => ({
      id: limit + index, single_word: false, lstrip: false, rstrip: false, normalized: false,
      special: true, ...token,
    })),
    normalizer: pipeline.normalizer,
    pre_tokenizer: pipeline.pre_tokenizer,
    post_processor: pipeline.post_processor,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: false, byte_fallback: false,
      ignore_merges: pipeline.ignore_merges, vocab, merges,
    },
  };
}

function templateFor(json, single) {
  const idOf = (content) => json.added_tokens.find((t) => t.content === content).id;
  const specials = {};
  for (const content of single.filter((item) => item !== '$A')) {
    specials[content] = { id: content, ids: [idOf(content)], tokens: [content] };
  }
  const items = single.map((item) => (item === '$A'
    ? { Sequence: { id: 'A', type_id: 0 } } : { SpecialToken: { id: item, type_id: 0 } }));
  return {
    type: 'TemplateProcessing', single: items, pair: [...items, ...items], special_tokens: specials,
  };
}

const llama3Pattern = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" +
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Texts aimed at the added-token flags of the tiny tokenizers, plus a slice of the main corpus.
const flagTexts = [
  'hello world', 'sayhello world', 'hello', 'hello_there', 'hello1', '(hello) hello.', 'Hello',
  'x <mask> y', 'x   <mask>y', '<mask>', '\t\n<mask>', 'a <sep>   b', '<sep>\n\nb', '<sep>',
  ' <both>  c', 'd<both>e', '<both>', '<s>inside</s>', '<tool>call', 'x<tool>y', '<tool><tool>',
  '\ufb01x fix \ufb01x', 'pre\ufb01xpost', '\u212b and \u00c5', 'hello<mask>hello',
  'hello <sep> hello',
];
const generalTexts = corpus.texts.filter((_, index) => index % 3 === 0);

async function main() {
  for (const name of ['qwen3', 'llama3']) {
    const file = path.join(cacheDir, name, 'tokenizer.json');
    if (!fs.existsSync(file)) throw new Error(`${file} is missing: run fetch_tokenizers.sh first`);
    const tokenizer = Tokenizer.fromFile(file);
    await writeGolden(name, file, tokenizer, corpus.texts, corpus.prefix_decode);
  }

  const qwen = JSON.parse(fs.readFileSync(path.join(cacheDir, 'qwen3', 'tokenizer.json'), 'utf8'));

  // GPT-2 style: ByteLevel does the splitting (use_regex) and adds a prefix space; merges are
  // "a b" strings; added tokens carry every flag; BOS/EOS come from TemplateProcessing.
  const gpt2 = cutFromQwen(qwen, 400, true, {
    normalizer: null,
    pre_tokenizer: {
      type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true,
    },
    post_processor: null,
    ignore_merges: false,
    added_tokens: [
      { content: '<s>' }, { content: '</s>' },
      { content: '<mask>', lstrip: true },
      { content: '<sep>', rstrip: true },
      { content: '<both>', lstrip: true, rstrip: true },
      { content: 'hello', single_word: true, special: false },
      { content: '<tool>', normalized: true, special: false },
    ],
  });
  gpt2.post_processor = templateFor(gpt2, ['<s>', '$A', '</s>']);

  // Split + ByteLevel(use_regex=false) like Llama-3, a Sequence normalizer that amounts to NFKC,
  // added tokens matched after normalization, ignore_merges, and a Sequence post-processor.
  const nfkc = cutFromQwen(qwen, 400, false, {
    normalizer: { type: 'Sequence', normalizers: [{ type: 'NFKD' }, { type: 'NFC' }] },
    pre_tokenizer: {
      type: 'Sequence', pretokenizers: [
        { type: 'Split', pattern: { Regex: llama3Pattern }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: null,
    ignore_merges: true,
    added_tokens: [
      { content: '<bos>' },
      { content: '\ufb01x', normalized: true, special: false },
      { content: '\u212b', normalized: true, special: false },
      { content: '<mask>', single_word: true, lstrip: true, rstrip: true },
    ],
  });
  nfkc.post_processor = {
    type: 'Sequence', processors: [
      { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
      templateFor(nfkc, ['<bos>', '$A']),
    ],
  };

  for (const [name, json] of [['tiny_gpt2', gpt2], ['tiny_nfkc', nfkc]]) {
    const file = path.join(here, `${name}.tokenizer.json`);
    fs.writeFileSync(file, JSON.stringify(json));
    console.log(`wrote ${name}.tokenizer.json`);
    const tokenizer = Tokenizer.fromFile(file);
    await writeGolden(name, file, tokenizer, [...flagTexts, ...generalTexts], []);
  }

  // Pre-tokenizers on their own: the pieces each configuration cuts a text into.
  const byteLevel = (addPrefixSpace, useRegex) => ({
    type: 'ByteLevel', add_prefix_space: addPrefixSpace, trim_offsets: true, use_regex: useRegex,
  });
  const split = (pattern, behavior, invert) => ({
    type: 'Sequence',
    pretokenizers: [{ type: 'Split', pattern, behavior, invert }, byteLevel(false, false)],
  });
  const preTokenizers = [];
  const behaviors = ['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous'];
  for (const behavior of behaviors) {
    for (const invert of [false, true]) {
      preTokenizers.push(split({ Regex: '\\d+|\\s' }, behavior, invert));
    }
    preTokenizers.push(split({ String: ' ' }, behavior, false));
  }
  preTokenizers.push(split({ String: '.*' }, 'Isolated', false));
  for (const addPrefixSpace of [false, true]) {
    for (const useRegex of [false, true]) {
      preTokenizers.push(byteLevel(addPrefixSpace, useRegex));
    }
  }
  preTokenizers.push(qwen.pre_tokenizer);
  const preTokenizerTexts = [
    'a1 22  333b', '  lead and trail  ', '1', ' ', 'x.*y.*', 'no digits here', '',
    ...corpus.texts.filter((_, index) => index % 7 === 0),
  ];
  const preTokenizerCases = [];
  for (const [index, config] of preTokenizers.entries()) {
    const json = cutFromQwen(qwen, 0, false, {
      normalizer: null, pre_tokenizer: config, post_processor: null, ignore_merges: false,
      added_tokens: [],
    });
    const preTokenizer = Tokenizer.fromString(JSON.stringify(json)).getPreTokenizer();
    for (const text of preTokenizerTexts) {
      const pieces = preTokenizer.preTokenizeString(text).map((piece) => piece[0]);
      preTokenizerCases.push({ config: index, text, pieces });
    }
  }
  writeGoldenFile('golden_pre_tokenizers.json', { generator },
      { configs: preTokenizers, cases: preTokenizerCases });

  // Normalizers on their own.
  const normalizers = [
    { type: 'NFC' }, { type: 'NFD' }, { type: 'NFKC' }, { type: 'NFKD' },
    { type: 'Sequence', normalizers: [{ type: 'NFD' }, { type: 'NFKC' }] },
  ];
  const normalizerCases = [];
  for (const [index, config] of normalizers.entries()) {
    const json = cutFromQwen(qwen, 0, false, {
      normalizer: config, pre_tokenizer: null, post_processor: null, ignore_merges: false,
      added_tokens: [],
    });
    const normalizer = Tokenizer.fromString(JSON.stringify(json)).getNormalizer();
    for (const text of corpus.texts) {
      normalizerCases.push({ config: index, text, normalized: normalizer.normalizeString(text) });
    }
  }
  writeGoldenFile('golden_normalizers.json', { generator },
      { configs: normalizers, cases: normalizerCases });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
