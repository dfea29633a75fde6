// Generates hf_golden.json: the ids the Hugging Face tokenizers library
// (Node binding, npm package "tokenizers" 0.23.2) gives for
//   - hand-picked strings and all Cranfield queries plus the first 100
//     passages, with bert-base-uncased;
//   - a few query/passage pairs (ids and type ids), with bert-base-uncased;
//   - strings with the Self-RAG tokens [Retrieve] and [No Retrieve] added as
//     special tokens to bert-base-uncased;
//   - the Cranfield queries with cranfield-8000.tokenizer.json (the
//     tokenizer Train builds from the Cranfield passages, saved by Save).
// The Go tests only read the output; rerun by hand after changing inputs:
//   cd tokenize/testdata && NODE_PATH=/path/to/node_modules node gen_hf_golden.js
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

const root = __dirname + '/../..';
const readJSONL = (p) => fs.readFileSync(p, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
const hand = JSON.parse(fs.readFileSync(__dirname + '/hand_strings.json', 'utf8'));
const queries = readJSONL(root + '/datasets/cranfield/queries.jsonl').map((d) => d.text);
const passages = readJSONL(root + '/datasets/cranfield/corpus.jsonl').slice(0, 100).map((d) => d.text);

function load(p) {
  const t = Tokenizer.fromFile(p);
  t.disablePadding();
  t.disableTruncation();
  return t;
}

(async () => {
  const bert = load(root + '/testdata/tokenizers/bert-base-uncased/tokenizer.json');
  const enc = async (t, texts) => Promise.all(texts.map(async (s) => (await t.encode(s)).getIds()));
  const out = {};
  out.bert = { texts: [...hand, ...queries, ...passages] };
  out.bert.ids = await enc(bert, out.bert.texts);
  out.pairs = { queries: queries.slice(0, 5), passages: passages.slice(0, 5) };
  out.pairs.ids = [];
  out.pairs.types = [];
  for (let i = 0; i < 5; i++) {
    const e = await bert.encode(out.pairs.queries[i], out.pairs.passages[i]);
    out.pairs.ids.push(e.getIds());
    out.pairs.types.push(e.getTypeIds());
  }
  const decodeIds = [101, 7592, 1010, 2088, 999, 2009, 1005, 1055, 14477, 20961, 3468, 102];
  out.decode = { ids: decodeIds, text: await bert.decode(decodeIds, true) };

  const selfrag = load(root + '/testdata/tokenizers/bert-base-uncased/tokenizer.json');
  selfrag.addSpecialTokens(['[Retrieve]', '[No Retrieve]']);
  out.selfrag = {
    added: ['[Retrieve]', '[No Retrieve]'],
    texts: ['[Retrieve] hello[No Retrieve]world', 'no retrieve [retrieve] [No Retrieve][Retrieve]', ...queries.slice(0, 10)],
  };
  out.selfrag.addedIds = out.selfrag.added.map((s) => selfrag.tokenToId(s));
  out.selfrag.ids = await enc(selfrag, out.selfrag.texts);

  const trained = load(__dirname + '/cranfield-8000.tokenizer.json');
  out.trained = { texts: queries };
  out.trained.ids = await enc(trained, queries);
  fs.writeFileSync(__dirname + '/hf_golden.json', JSON.stringify(out) + '\n');
})();
