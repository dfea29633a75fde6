// The Lucene 4.10 peer of ragtrain's speed benchmark (bench/, `go run ./cmd/bench`): BM25
// indexing and querying of the corpus.tsv and queries.tsv the Go side wrote, timed inside the
// JVM (JVM start and class loading are left out), with the worker protocol of
// bench/protocol.go: it prints {"ready": true, ...}; each "run" line on stdin does one timed run
// and prints {"seconds", "cpu_seconds", "units", "digest"} (CPU time of the whole JVM, JIT and
// GC threads included); "quit" prints {"peak_rss_kib"} (VmHWM) and exits.
//
// As ../shared/refs ran it: EnglishAnalyzer, BM25Similarity(k1 = 1.2, b = 0.75), one field
// holding title + " " + text, a query the OR (SHOULD) of its analyzed terms, top 1000. The index
// lives in a RAMDirectory, as ours lives in memory.
//
// Build (the orchestrator does it): javac -cp lucene-core-4.10.4.jar:lucene-analyzers-common-4.10.4.jar
// LuceneBench.java (Debian liblucene4.10-java, default-jdk-headless).

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;

import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.Term;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.TopDocs;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.RAMDirectory;
import org.apache.lucene.util.Version;

public final class LuceneBench {
    private static final String FIELD = "body";

    private final List<String> docIds = new ArrayList<>(), docTexts = new ArrayList<>();
    private final List<String> queryIds = new ArrayList<>(), queryTexts = new ArrayList<>();
    private final Analyzer analyzer = new EnglishAnalyzer();
    private final BM25Similarity similarity = new BM25Similarity(1.2f, 0.75f);
    private final int depth;
    private RAMDirectory dir;
    private TopDocs[] results;

    private LuceneBench(String corpus, String queries, int depth) throws IOException {
        readTSV(corpus, docIds, docTexts);
        readTSV(queries, queryIds, queryTexts);
        this.depth = depth;
        BooleanQuery.setMaxClauseCount(1 << 16);
    }

    private static void readTSV(String path, List<String> ids, List<String> texts) throws IOException {
        int n = 0;
        for (String line : Files.readAllLines(Paths.get(path), StandardCharsets.UTF_8)) {
            n++;
            int tab = line.indexOf('\t');
            if (tab <= 0) {
                throw new IOException(path + ":" + n + ": want id TAB text");
            }
            ids.add(line.substring(0, tab));
            texts.add(line.substring(tab + 1));
        }
    }

    private int index() throws IOException {
        RAMDirectory d = new RAMDirectory();
        IndexWriterConfig cfg = new IndexWriterConfig(Version.LUCENE_4_10_4, analyzer);
        cfg.setSimilarity(similarity);
        cfg.setOpenMode(IndexWriterConfig.OpenMode.CREATE);
        try (IndexWriter w = new IndexWriter(d, cfg)) {
            for (String text : docTexts) {
                Document doc = new Document();
                doc.add(new TextField(FIELD, text, Field.Store.NO));
                w.addDocument(doc);
            }
        }
        dir = d;
        return docTexts.size();
    }

    private BooleanQuery parse(String text) throws IOException {
        BooleanQuery q = new BooleanQuery();
        try (TokenStream ts = analyzer.tokenStream(FIELD, text)) {
            CharTermAttribute term = ts.addAttribute(CharTermAttribute.class);
            ts.reset();
            while (ts.incrementToken()) {
                q.add(new TermQuery(new Term(FIELD, term.toString())), BooleanClause.Occur.SHOULD);
            }
            ts.end();
        }
        return q;
    }

    private int query() throws IOException {
        try (DirectoryReader r = DirectoryReader.open(dir)) {
            IndexSearcher s = new IndexSearcher(r);
            s.setSimilarity(similarity);
            results = new TopDocs[queryTexts.size()];
            for (int i = 0; i < results.length; i++) {
                results[i] = s.search(parse(queryTexts.get(i)), depth);
            }
        }
        return results.length;
    }

    // digest is bench.Digest: SHA-256 of "qid n s1 ... s10\n" per query (scores as float32 bits in
    // hex), first 16 hex digits.
    private String digest() throws Exception {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < results.length; i++) {
            ScoreDoc[] sd = results[i].scoreDocs;
            b.append(queryIds.get(i)).append(' ').append(sd.length);
            for (int j = 0; j < Math.min(10, sd.length); j++) {
                b.append(' ').append(Integer.toHexString(Float.floatToIntBits(sd[j].score)));
            }
            b.append('\n');
        }
        byte[] h = MessageDigest.getInstance("SHA-256").digest(b.toString().getBytes(StandardCharsets.UTF_8));
        StringBuilder hex = new StringBuilder();
        for (int i = 0; i < 8; i++) {
            hex.append(String.format("%02x", h[i] & 0xff));
        }
        return hex.toString();
    }

    private static long peakRSSKiB() {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/self/status"), StandardCharsets.UTF_8)) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.substring(6).trim().split("\\s+")[0]);
                }
            }
        } catch (IOException | NumberFormatException e) {
            // no /proc: report 0
        }
        return 0;
    }

    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }

    private static void send(String json) {
        System.out.println(json);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String workload = null, corpus = null, queries = null;
        int depth = 1000;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--workload": workload = args[i + 1]; break;
                case "--corpus": corpus = args[i + 1]; break;
                case "--queries": queries = args[i + 1]; break;
                case "--depth": depth = Integer.parseInt(args[i + 1]); break;
                default: send("{\"error\": " + quote("unknown flag " + args[i]) + "}"); System.exit(2);
            }
        }
        if (workload == null || corpus == null || queries == null
                || !(workload.equals("bm25-index") || workload.equals("bm25-query"))) {
            send("{\"error\": \"usage: LuceneBench --workload bm25-index|bm25-query --corpus corpus.tsv --queries queries.tsv [--depth 1000]\"}");
            System.exit(2);
        }
        LuceneBench b;
        try {
            b = new LuceneBench(corpus, queries, depth);
            if (workload.equals("bm25-query")) {
                b.index();
            }
        } catch (Exception e) {
            send("{\"error\": " + quote(e.toString()) + "}");
            System.exit(1);
            return;
        }
        String version = org.apache.lucene.util.Constants.LUCENE_MAIN_VERSION;
        send("{\"ready\": true, \"system\": " + quote("Lucene " + version + " (Java " + System.getProperty("java.version") + ")") + ", \"threads\": 1}");
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            switch (line.trim()) {
                case "run": {
                    long t0 = System.nanoTime(), c0 = os.getProcessCpuTime();
                    int units = workload.equals("bm25-index") ? b.index() : b.query();
                    double sec = (System.nanoTime() - t0) / 1e9, cpu = (os.getProcessCpuTime() - c0) / 1e9;
                    String extra = workload.equals("bm25-query") ? ", \"digest\": " + quote(b.digest()) : "";
                    send("{\"seconds\": " + sec + ", \"cpu_seconds\": " + cpu + ", \"units\": " + units + extra + "}");
                    break;
                }
                case "quit":
                    send("{\"peak_rss_kib\": " + peakRSSKiB() + "}");
                    return;
                default:
                    send("{\"error\": " + quote("unknown command " + line) + "}");
                    System.exit(1);
            }
        }
    }
}
