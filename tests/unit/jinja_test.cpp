// The Jinja template engine: each language feature with outputs as Jinja2 3.1 renders them
// under HuggingFace's chat-template settings (trim_blocks, lstrip_blocks), errors and
// limits, and real chat templates rendering whole conversations.
//
// The real templates in chat_templates/ are the models' tokenizer.chat_template texts:
//   qwen3.jinja              Qwen/Qwen3-0.6B: ye-NX/llama.cpp models/templates/Qwen-Qwen3-0.6B.jinja
//   llama3_3.jinja           meta-llama/Llama-3.3-70B-Instruct (same as Llama 3.1):
//                            ye-NX/llama.cpp models/templates/meta-llama-Llama-3.3-70B-Instruct.jinja
//   llama3_2.jinja           meta-llama/Llama-3.2-3B-Instruct: ye-NX/llama.cpp
//                            models/templates/meta-llama-Llama-3.2-3B-Instruct.jinja
//   mistral_v0_3.jinja       mistralai/Mistral-7B-Instruct-v0.3: the MISTRAL constant of a public
//                            "Understanding Chat Templates" script (search index file 38793785617)
//   mistral_nemo.jinja       mistralai/Mistral-Nemo-Instruct-2407: ye-NX/llama.cpp
//                            models/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja
//   mistral_small_3_1.jinja  mistralai/Mistral-Small-3.1-24B-Instruct-2503: ggml-org/llama.cpp
//                            models/templates/mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja
//   deepseek_v3.jinja        deepseek-ai/DeepSeek-V3-0324: tokenizer.chat_template of unsloth's
//                            GGUF as llama-cpp-python printed it (search index file 42681282753)
//   deepseek_r1.jinja        deepseek-ai/DeepSeek-R1 (distills): ggml-org/llama.cpp
//                            models/templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja
//   deepseek_v3_1.jinja      deepseek-ai/DeepSeek-V3.1: ye-NX/llama.cpp models/templates/deepseek-ai-DeepSeek-V3.1.jinja
//   gpt_oss.jinja            openai/gpt-oss-120b (harmony): ye-NX/llama.cpp models/templates/openai-gpt-oss-120b.jinja
//   qwen3_6.jinja            Qwen/Qwen3.6-35B-A3B chat_template.jinja (Qwen3.5's with preserve_thinking): the
//                            QWEN3_PROPS constant of a public web-UI test fixture (search index file 60944032562);
//                            its SHA-256 (no trailing newline), e84f32a2...574259, is the one a public model
//                            profile pins as the official Qwen3.6-35B-A3B GGUF template (index file 57432890823)
// Their expected outputs follow from reading each template, and were checked against
// Jinja2 3.1 with HuggingFace's environment.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "temp_path.h"
#include "text/chat_template.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"
#include "text/tokenizer.h"
#include "util/error.h"

namespace epq::text::jinja {
namespace {

using Json = nlohmann::ordered_json;

RenderOptions fixed_clock() {
  using namespace std::chrono;
  RenderOptions options;
  options.now = local_days(year(2025) / March / 7) + hours(14) + minutes(5) + seconds(9);
  return options;
}

std::string render(std::string_view source, const Json& context = Json::object()) {
  return Template(source).render(context, fixed_clock());
}

// The message of the error that parsing or rendering throws.
std::string error_of(std::string_view source, const Json& context = Json::object()) {
  try {
    render(source, context);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string template_file(const std::string& name) {
  const auto path = std::filesystem::path(__FILE__).parent_path() / "chat_templates" / (name + ".jinja");
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::stringstream source;
  source << in.rdbuf();
  return source.str();
}

std::string render_file(const std::string& name, const Json& context) { return render(template_file(name), context); }

// -- values

TEST(JinjaValue, PrintsLikePython) {
  EXPECT_EQ(render("{{ none }}|{{ true }}|{{ false }}|{{ 42 }}|{{ -7 }}|{{ missing }}|"), "None|True|False|42|-7||");
  EXPECT_EQ(render("{{ 1.0 }} {{ 1.5e300 * 1e10 }} {{ -0.0 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 0.1 + 0.2 }}"),
            "1.0 inf -0.0 1e+16 1000000000000000.0 0.0001 1e-05 0.30000000000000004");
  EXPECT_EQ(render(R"({{ [1, "a", none, true, 1.0, {"k": "v'"}] }})"), R"([1, 'a', None, True, 1.0, {'k': "v'"}])");
  EXPECT_EQ(render(R"({{ ["it's", 'q"', "a\nb"] }})"), R"(["it's", 'q"', 'a\nb'])");
  EXPECT_EQ(render("{{ [1, [2, [3]]] }} {{ {'a': {'b': none}} }}"), "[1, [2, [3]]] {'a': {'b': None}}");
}

TEST(JinjaValue, JsonRoundTripKeepsKeyOrder) {
  const Json json = Json::parse(R"({"z": 1, "a": [true, null, 2.5, "s", 18446744073709551615], "m": {}})");
  const Value v = Value::from_json(json);
  EXPECT_EQ(v.dump(JsonStyle{}), R"({"z": 1, "a": [true, null, 2.5, "s", 1.8446744073709552e+19], "m": {}})");
  EXPECT_EQ(Value::from_json(Json::parse(R"({"z": 1, "a": [true, null, "s"]})")).to_json().dump(), R"({"z":1,"a":[true,null,"s"]})");
  EXPECT_EQ(Value::from_json(nlohmann::json::parse(R"({"z": 1, "a": 2})")).to_string(), "{'a': 2, 'z': 1}");  // json sorts
}

TEST(JinjaValue, EqualityAndOrderFollowPython) {
  EXPECT_EQ(render("{{ 1 == true }} {{ 1.0 == 1 }} {{ [1, 2] == [1, 2.0] }} {{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ 'a' == 1 }}"),
            "True True True True False");
  EXPECT_EQ(render("{{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ [1] < [1, 0] }} {{ 2 > 1.5 }} {{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }}"),
            "True True True True True False");
  EXPECT_EQ(render("{{ 0 or none }} {{ '' or 'y' }} {{ 'x' and 2 }} {{ [] and 1 }} {{ not {} }}"), "None y 2 [] True");
}

// -- syntax and whitespace

TEST(JinjaWhitespace, TrimAndLstripBlocks) {
  EXPECT_EQ(render("  {% if true %}\n    yes\n  {% endif %}\n  {{ 'out' }}\n"), "    yes\n  out");
  EXPECT_EQ(render("a  {# c #}\nb {% if 1 %}\n  x\n  {# hi #}\ny{{ 1 }}\n{% endif %}\n"), "a  b   x\ny1\n");
  EXPECT_EQ(render("x\n"), "x");  // one trailing newline is dropped
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("a\r\nb\rc"), "a\nb\nc");
}

TEST(JinjaWhitespace, DashAndPlusModifiers) {
  EXPECT_EQ(render("{%- if true -%}   \n  a  \n  {%- endif -%}  b"), "ab");
  EXPECT_EQ(render("x \n {{- 1 -}} \n y"), "x1y");
  EXPECT_EQ(render("{# comment #}\n{#- x -#}  \n  c {#- y #}\n d"), "c d");
  EXPECT_EQ(render("{%+ if true %}a{% endif +%}\nb\n  {%+ if true %}c{% endif %}"), "a\nb\n  c");
  EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}|{% raw -%}   a  {%- endraw %}|"), "{{ x }}|a|");
}

TEST(JinjaSyntax, Literals) {
  EXPECT_EQ(render(R"({{ "a\
b\"c\x41\u00e9\q" }})"), "ab\"cA\u00e9\\q");
  EXPECT_EQ(render(R"({{ 'it''s' }} {{ "x" "y" }} {{ 1_000 }} {{ 2.5e3 }} {{ True }} {{ None }})"), "its xy 1000 2500.0 True None");
  EXPECT_EQ(render("{{ [1,] }} {{ {'a': 1,} }} {{ () }} {{ (1, 2) }}"), "[1] {'a': 1} [] [1, 2]");  // tuples are lists
}

TEST(JinjaSyntax, OperatorPrecedence) {
  EXPECT_EQ(render("{{ 10 - 3 * 2 }} {{ (10 - 3) * 2 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ -3|abs }} {{ 1 ~ 2 * 3 }}"), "4 14 64 4 3 16");
  EXPECT_EQ(render("{{ 'a' if false else 'b' if true else 'c' }}|{{ 'x' if false }}|{{ not 1 == 2 }}"), "b||True");
  EXPECT_EQ(render("{{ [1, 2, 3]|length > 2 and 'x' in 'xyz' }}"), "True");
}

// -- expressions

TEST(JinjaExpressions, Arithmetic) {
  EXPECT_EQ(render("{{ 7 / 2 }} {{ 4 / 2 }} {{ -7 // 2 }} {{ 7.5 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}"),
            "3.5 2.0 -4 3.0 2 -2 1024 0.5");
  EXPECT_EQ(render("{{ 'ab' * 3 }} {{ 2 * [1] }} {{ [1] + [2] }} {{ 'a' + 'b' }} {{ 'a' ~ 1 ~ none ~ missing }} {{ 1 + true }}"),
            "ababab [1, 1] [1, 2] ab a1None 2");
}

TEST(JinjaExpressions, Membership) {
  EXPECT_EQ(render("{{ 'a' in 'abc' }} {{ 'z' not in 'abc' }} {{ 1 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 2 not in [1] }}"),
            "True True True True True");
}

TEST(JinjaExpressions, SubscriptsAndSlices) {
  EXPECT_EQ(render("{{ [1, 2, 3, 4, 5][1:] }} {{ [1, 2, 3, 4, 5][::-1] }} {{ [1, 2, 3, 4, 5][-2:] }} {{ [1, 2, 3][5:1:-1] }}"),
            "[2, 3, 4, 5] [5, 4, 3, 2, 1] [4, 5] [3]");
  EXPECT_EQ(render("{{ 'h\u00e9llo'[1:3] }} {{ 'abc'[-1] }} {{ 'abc'[::2] }} {{ 'abcdef'[:-1] }} {{ 'id123456789'[-9:] }}"),
            "\u00e9l c ac abcde 123456789");
  EXPECT_EQ(render("{{ [1, 2][10] is defined }} {{ {'a': {'b': [1, {'c': 'd'}]}}.a.b.1.c }}"), "False d");
}

TEST(JinjaExpressions, AttributesAndUndefined) {
  const Json context = Json::parse(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null}]})");
  EXPECT_EQ(render("{{ messages[0].role }} {{ messages[0]['content'] }} {{ messages[-1].content }} {{ messages|length }}", context),
            "user hi None 2");
  EXPECT_EQ(render("{{ messages[1].tool_calls is defined }} {{ messages[5] is defined }} {{ messages[0].role.x is defined }}", context),
            "False False False");
  // dict methods win over keys for ".", keys over methods for "[]", as in Jinja.
  EXPECT_EQ(render("{{ {'items': 1}['items'] }} {{ {'a': 1}['items'] is defined }} {{ {'a': 1}.items is callable }}"), "1 True True");
}

// Jinja raises when an undefined value is looked into or iterated; here the result is
// undefined again, so a template guarding with "is defined" one level too late still works.
TEST(JinjaExpressions, UndefinedIsLenient) {
  EXPECT_EQ(render("[{{ x.y.z }}|{{ x['y'] }}|{{ x[1:] }}|{{ x|length }}|{{ x|list }}|{{ x|join }}|{{ 'a' in x }}|{{ x.y is defined }}]"),
            "[|||0|[]||False|False]");
}

TEST(JinjaExpressions, StringMethods) {
  EXPECT_EQ(render("{{ 'a,b,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a</think>b</think>c'.split('</think>')[-1] }}"),
            "['a', 'b', 'c'] ['a', 'b'] ['a', 'b,c'] c");
  EXPECT_EQ(render("{{ 'abc'.startswith('a') }} {{ 'abc'.endswith(('x', 'c')) }} [{{ '  x '.strip() }}] {{ 'xxa'.lstrip('x') }} {{ 'axx'.rstrip('x') }}"),
            "True True [x] a a");
  EXPECT_EQ(render("{{ 'abcabc'.find('c') }} {{ 'abc'.find('z') }} {{ 'aXa'.count('a') }} {{ '-'.join(['a', 'b']) }} {{ 'a b'.replace(' ', '_') }}"),
            "2 -1 2 a-b a_b");
  EXPECT_EQ(render("{{ 'hello woRLD'.title() }} {{ 'ABC'.lower() }} {{ 'abc'.upper() }} {{ 'hELLO'.capitalize() }}"), "Hello World abc ABC Hello");
  EXPECT_EQ(render("{{ '{} and {}'.format(1, 'b') }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{n}!'.format(n=3) }}"), "1 and b aba 3!");
}

TEST(JinjaExpressions, DictAndListMethods) {
  EXPECT_EQ(render("{% set d = {'a': 1, 'b': 2} %}{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }} {{ d.keys()|list }} {{ d.values()|list }}"),
            "1 None 5 ['a', 'b'] [1, 2]");
  EXPECT_EQ(render("{% set d = {'a': 1, 'b': 2} %}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(render("{% set l = [1] %}{{ l.append(2) }}{{ l }}"), "None[1, 2]");  // HuggingFace's sandbox forbids it
}

// -- filters and tests

TEST(JinjaFilters, Strings) {
  EXPECT_EQ(render("{{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'Hello'|upper }}|{{ 'HeLLo'|lower }}|{{ 'hello wORLD-x(y'|title }}|{{ 'hELLO'|capitalize }}"),
            "a b|a|HELLO|hello|Hello World-X(Y|Hello");
  EXPECT_EQ(render("{{ 'aaa'|replace('a', 'b', 2) }} {{ 'a b  c'|wordcount }} [{{ 'ab'|center(7) }}] [{{ 'ab'|center(6) }}] {{ 1|string }}{{ [1]|string }}"),
            "bba 3 [   ab  ] [  ab  ] 1[1]");
  EXPECT_EQ(render("{{ 'hello world foo bar'|truncate(9) }}|{{ 'hello world foo bar'|truncate(9, true) }}|{{ 'hello'|truncate(3, leeway=0, end='.') }}"),
            "hello...|hello ...|he.");
  EXPECT_EQ(render("{{ \"<a href='x'>&\"|e }} {{ '<b>'|safe }} {{ '<i>'|escape }}"), "&lt;a href=&#39;x&#39;&gt;&amp; <b> &lt;i&gt;");
}

TEST(JinjaFilters, Indent) {
  EXPECT_EQ(render("{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'x\\ny'|indent('> ') }}"),
            "a\n    b\n\n    c|  a\n  b|a\n  \n  b|x\n> y");
}

TEST(JinjaFilters, Tojson) {
  EXPECT_EQ(render(R"({{ "abc"|tojson }} {{ {"a": [1, 2.5, "é\n<"]}|tojson }} {{ none|tojson }} {{ [true, false]|tojson }})"),
            R"("abc" {"a": [1, 2.5, "é\n<"]} null [true, false])");
  EXPECT_EQ(render(R"({{ {"a": [1, {"b": []}, {}]}|tojson(indent=2) }})"), "{\n  \"a\": [\n    1,\n    {\n      \"b\": []\n    },\n    {}\n  ]\n}");
  EXPECT_EQ(render(R"({{ {"b": 1, "a": 2}|tojson(sort_keys=true) }} {{ "é😀"|tojson(ensure_ascii=true) }} {{ [1, 2]|tojson(separators=(",", ":")) }})"),
            R"({"a": 2, "b": 1} "\u00e9\ud83d\ude00" [1,2])");
  EXPECT_EQ(render(R"({{ "\t\u0001"|tojson }})"), R"("\t\u0001")");
}

TEST(JinjaFilters, Sequences) {
  EXPECT_EQ(render("{{ [3, 1, 2]|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ ['b', 'A', 'c']|sort }} {{ [{'n': 2}, {'n': 1}]|sort(attribute='n') }}"),
            "[1, 2, 3] [3, 2, 1] ['A', 'b', 'c'] [{'n': 1}, {'n': 2}]");
  EXPECT_EQ(render("{{ [1, 2, 2, 3, 1]|unique|list }} {{ ['a', 'A', 'b']|unique|list }} {{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }}"),
            "[1, 2, 3] ['a', 'b'] [3, 2, 1] cba");
  EXPECT_EQ(render("{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ []|first is defined }} {{ 'h\u00e9'|list }} {{ {'a': 1}|list }}"),
            "1 3 False ['h', '\u00e9'] ['a']");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ {'a': 1}|items|list }}"),
            "[['a', 2], ['b', 1]] [['b', 1], ['a', 2]] [['a', 1]]");
  EXPECT_EQ(render("{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 'x')|list }}"), "[[1, 2], [3, 4], [5]] [[1, 2], [3, 'x']]");
  EXPECT_EQ(render("{{ [1, 2, 3]|sum }} {{ [{'a': 1}, {'a': 2}]|sum(attribute='a') }} {{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A']|max }}"),
            "6 3 1 3 b");
  EXPECT_EQ(render("{{ [1, 2, 3]|join(', ') }} {{ [{'n': 'x'}, {'n': 'y'}]|join('-', attribute='n') }} {{ 'abc'|length }} {{ {'a': 1}|count }}"),
            "1, 2, 3 x-y 3 1");
}

TEST(JinjaFilters, MapAndSelect) {
  EXPECT_EQ(render("{{ [1, 2, 3]|map('string')|join(',') }} {{ [{'a': 'x'}, {'a': 'y'}]|map(attribute='a')|join }} {{ [{'a': 'x'}, {}]|map(attribute='a', default='d')|list }}"),
            "1,2,3 xy ['x', 'd']");
  EXPECT_EQ(render("{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ [0, 1, none, '', 2]|select|list }} {{ [1, 5, 3]|select('>', 2)|list }}"),
            "[1, 3] [1, 3] [1, 2] [5, 3]");
  EXPECT_EQ(render("{{ [{'r': 'u'}, {'r': 'a'}]|selectattr('r', 'equalto', 'u')|list }} {{ [{'r': 'u'}, {'x': 1}]|selectattr('r', 'defined')|list }} {{ [{'r': 'u'}, {'r': 'a'}]|rejectattr('r', '==', 'u')|list }}"),
            "[{'r': 'u'}] [{'r': 'u'}] [{'r': 'a'}]");
  EXPECT_EQ(render("{{ ['x', 'code_interpreter', 'y']|reject('equalto', 'code_interpreter')|join(', ') }}"), "x, y");
}

TEST(JinjaFilters, Numbers) {
  EXPECT_EQ(render("{{ '12'|int }} {{ '1.7'|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 'a'|float }} {{ 2|float }}"),
            "12 1 0 5 3 2.5 0.0 2.0");
  EXPECT_EQ(render("{{ -3|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 2.1|round(method='ceil') }} {{ 3|round }}"),
            "3 2.5 2.0 4.0 2.57 3.0 3");
}

TEST(JinjaFilters, Default) {
  EXPECT_EQ(render("{{ x|default('d') }} {{ none|default('d') }} {{ ''|default('d', true) }} {{ x|d('y') }} {{ x|default }}|"), "d None d y |");
}

TEST(JinjaTests, Kinds) {
  EXPECT_EQ(render("{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 1 is integer }} {{ true is integer }} {{ true is number }} {{ 1.0 is float }} {{ 'a' is string }}"),
            "False True True True False True True True");
  EXPECT_EQ(render("{{ {} is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ x is iterable }} {{ {} is sequence }} {{ range is callable }} {{ 1 is callable }}"),
            "True True True True True True False");
  EXPECT_EQ(render("{{ true is true }} {{ false is false }} {{ 1 is true }} {{ true is boolean }} {{ 'ab' is lower }} {{ 'AB' is upper }} {{ x is not defined }}"),
            "True True False True True True True");
}

TEST(JinjaTests, Comparisons) {
  EXPECT_EQ(render("{{ 3 is divisibleby 3 }} {{ 4 is divisibleby(3) }} {{ 2 is even }} {{ 3 is odd }} {{ 2 is eq 2 }} {{ 2 is ne 3 }}"),
            "True False True True True True");
  EXPECT_EQ(render("{{ 2 is lt 3 }} {{ 2 is gt 3 }} {{ 2 is ge 2 }} {{ 2 is le 1 }} {{ 1 is in [1] }} {{ 'a' is equalto 'a' }}"),
            "True False True False True True");
}

// -- statements

TEST(JinjaStatements, IfElifElse) {
  EXPECT_EQ(render("{% if a %}A{% elif b %}B{% else %}C{% endif %}", Json{{"a", false}, {"b", true}}), "B");
  EXPECT_EQ(render("{% if a %}A{% elif b %}B{% else %}C{% endif %}", Json{{"a", false}, {"b", false}}), "C");
}

TEST(JinjaStatements, ForLoopVariable) {
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
                   "{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}"),
            "1032TrueFalse3 2121FalseFalse3 3210FalseTrue3 ");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem }}/{{ loop.nextitem }} {% endfor %}"), "/2 1/3 2/ ");
  EXPECT_EQ(render("{% for x in [1, 2] %}{% for y in [3] %}{{ loop.index }}{% endfor %}{{ loop.index }}{% endfor %}"), "1112");
}

TEST(JinjaStatements, ForFilterElseUnpackAndControl) {
  EXPECT_EQ(render("{% for x in range(6) if x is odd %}{{ x }}{{ loop.index }}{% endfor %}"), "113253");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}{% for x in missing %}a{% else %}none{% endfor %}"), "emptynone");
  EXPECT_EQ(render("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %} {% for c in 'h\u00e9' %}{{ c }}.{% endfor %}"), "37 h.\u00e9.");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "0134");
  EXPECT_EQ(render("{{ range(5)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }}"), "[0, 1, 2, 3, 4] [1, 4, 7] [5, 3, 1]");
}

TEST(JinjaStatements, SetIsScopedToTheLoopIteration) {
  EXPECT_EQ(render("{% set a = [] %}{% for m in [1, 2, 3] %}{% set a = a + [m] %}{{ a|length }}{% endfor %}{{ a|length }}"), "1110");
  EXPECT_EQ(render("{% for i in [1, 2] %}{% if i == 1 %}{% set x = 5 %}{% endif %}[{{ x }}]{% endfor %}[{{ x }}]"), "[5][][]");
  EXPECT_EQ(render("{% set ns = namespace(a=1, items=[]) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}"), "4");
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.x = 'v' %}{{ ns.x }} {{ namespace({'k': 1}, j=2).j }}"), "v 2");
}

TEST(JinjaStatements, SetForms) {
  EXPECT_EQ(render("{% set a, b = [5, 6] %}{{ a }}{{ b }} {% set x %}block {{ 1 + 1 }}{% endset %}[{{ x }}]"), "56 [block 2]");
  EXPECT_EQ(render("{% set messages = messages[1:] %}{{ messages }}", Json{{"messages", {1, 2, 3}}}), "[2, 3]");
  EXPECT_EQ(render("{{ dict(a=1, b='x') }}"), "{'a': 1, 'b': 'x'}");
}

TEST(JinjaMacros, ArgumentsAndDefaults) {
  EXPECT_EQ(render("{% macro f(a, b=2, c='x') %}[{{ a }}|{{ b }}|{{ c }}]{% endmacro %}{{ f(1) }}{{ f(1, 3) }}{{ f(1, c='y') }}{{ f(a=9) }}"),
            "[1|2|x][1|3|x][1|2|y][9|2|x]");
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
  EXPECT_EQ(render("{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{% set x = 2 %}{{ m() }}"), "12");
  EXPECT_EQ(render("{% macro m(a) %}{{ varargs|length }}{{ kwargs.k }}{% endmacro %}{{ m(1, 2, k=3) }}"), "13");
  EXPECT_EQ(render("{% set r = 'x' %}{% macro m() %}{% set r = 'inner' %}{{ r }}{% endmacro %}{{ m() }}{{ r }}"), "innerx");
}

TEST(JinjaStatements, GenerationBlockRendersItsBody) {
  EXPECT_EQ(render("{% generation %}a{{ 1 }}{% endgeneration %}"), "a1");
}

TEST(JinjaGlobals, StrftimeNowAndRaiseException) {
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M:%S %d %b %Y %A %j') }}"), "2025-03-07 14:05:09 07 Mar 2025 Friday 066");
  EXPECT_EQ(Template("{{ strftime_now('%Y') }}").render(Json::object()).size(), 4u);  // the real clock
  try {
    render("{{ raise_exception('Roles must alternate!') }}");
    FAIL();
  } catch (const RaisedError& e) {
    EXPECT_STREQ(e.what(), "Roles must alternate!");
  }
}

// -- errors and limits

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("{% if %}{% endif %}"), "template:1:7: expected an expression, got '%}'");
  EXPECT_EQ(error_of("line1\n{% if true %}"), "template:2:1: 'if' is never closed (missing {% endif %})");
  EXPECT_EQ(error_of("\n\n  {{ 1 +* 2 }}"), "template:3:9: expected an expression, got '*'");
  EXPECT_EQ(error_of("{{ x | nofilter }}"), "template:1:8: unknown filter 'nofilter'");
  EXPECT_EQ(error_of("{{ x is notatest }}"), "template:1:9: unknown test 'notatest'");
  EXPECT_EQ(error_of("{% endif %}"), "template:1:4: unexpected '{% endif %}'");
  EXPECT_EQ(error_of("{{ 1 }"), "template:1:6: unexpected '}'");
  EXPECT_EQ(error_of("{{ 'abc }}"), "template:1:4: unterminated string");
  EXPECT_EQ(error_of("{# open"), "template:1:1: unclosed comment (missing #})");
  EXPECT_EQ(error_of("{% for x in [1] %}{% endfor %}{% break %}"), "template:1:34: 'break' outside of a for loop");
  EXPECT_EQ(error_of("{% include 'x' %}"), "template:1:4: the 'include' tag is not supported");
  EXPECT_EQ(error_of("{% frob %}"), "template:1:4: unknown tag 'frob'");
  EXPECT_EQ(error_of("{{ 'a' }"), "template:1:8: unexpected '}'");
  EXPECT_EQ(error_of("{{ a.b(}}"), "template:1:8: unexpected '}'");
}

TEST(JinjaErrors, RuntimeErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("{{ 10 // 0 }}"), "template:1:7: integer division or modulo by zero");
  EXPECT_EQ(error_of("{{ 1 + 'a' }}"), "template:1:6: unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(error_of("{{ x + 1 }}"), "template:1:6: unsupported operand type(s) for +: 'undefined' and 'int'");
  EXPECT_EQ(error_of("{{ foo() }}"), "template:1:7: 'foo' is undefined");
  EXPECT_EQ(error_of("{{ 'a'.nomethod() }}"), "template:1:16: 'str' object has no method 'nomethod'");
  EXPECT_EQ(error_of("{{ none.strip() }}"), "template:1:14: 'NoneType' object has no method 'strip'");
  EXPECT_EQ(error_of("\n{% for x in 5 %}{% endfor %}"), "template:2:1: 'int' object is not iterable");
  EXPECT_EQ(error_of("{% set ns = 1 %}{% set ns.x = 2 %}"), "template:1:17: cannot set 'ns.x': 'ns' is not a namespace()");
  EXPECT_EQ(error_of("{{ [1, 2] < 'a' }}"), "template:1:4: '<' not supported between instances of 'list' and 'str'");
  EXPECT_EQ(error_of("{{ 'x'|tojson(indent=2, junk=1) }}"), "template:1:8: tojson() got an unexpected keyword argument 'junk'");
  EXPECT_EQ(error_of("{{ x|tojson }}"), "template:1:6: Object of type Undefined is not JSON serializable");
  EXPECT_EQ(error_of("{{ 9223372036854775807 + 1 }}"), "template:1:24: integer overflow");
  EXPECT_EQ(error_of("{{ 1 }}", Json::array()), "template context must be a JSON object");
}

TEST(JinjaLimits, RecursionAndSizeAreBounded) {
  EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"), "template:1:21: macro calls nested more than 256 deep");
  EXPECT_EQ(error_of("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
            "template:1:76: string too long: over 67108864 bytes");
  EXPECT_EQ(error_of("{{ 'a' * 100000000000 }}"), "template:1:8: string too long: over 67108864 bytes");
  EXPECT_EQ(error_of("{{ range(100000000)|length }}"), "template:1:9: list too long: over 1048576 items");
  EXPECT_EQ(error_of("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}"), "template:1:131: nested more than 256 levels deep");
  EXPECT_EQ(error_of("{% set l = [] %}{% set m = [l] %}{{ l.append(m) }}"), "template:1:45: cannot append a list to itself");
  EXPECT_EQ(error_of("{% set ns = namespace(a=[]) %}{% set ns.b = [ns] %}"), "template:1:31: cannot set 'ns.b' to a value that holds 'ns'");
  std::string deep = "1";
  for (int i = 0; i < 600; ++i) deep = "[" + deep + "]";
  EXPECT_EQ(error_of("{{ x }}", Json::parse("{\"x\": " + deep + "}")), "template context: value nested more than 512 levels deep");
}

// Left-associative chains nest their trees without nesting the parser: their height has
// its own bound, checked as they are built (evaluating or destroying 100,000 levels
// would overflow the stack).
TEST(JinjaLimits, LongOperatorAndFilterChainsAreBounded) {
  auto chain = [](std::string first, std::string_view link, int n) {
    for (int i = 0; i < n; ++i) first += link;
    return "{{ " + first + " }}";
  };
  for (const std::string_view link : {" + 1", " - 1", " * 1", " ~ 'a'", " // 1", " ** 1", " and 1", " or 1", "|string", ".x", "[0]", "()",
                                  " is defined"}) {
    SCOPED_TRACE(link);
    const std::string error = error_of(chain("1", link, 100000));
    EXPECT_NE(error.find("expression nested more than 1024 levels deep"), std::string::npos) << error;
  }
  // Comparison chains (a == b == c) are one flat node, evaluated in a loop: no bound needed.
  EXPECT_EQ(render(chain("1", " == 1", 100000)), "True");
  // Up to the bound, chains render.
  EXPECT_EQ(render(chain("0", " + 1", 1000)), "1000");
  EXPECT_EQ(render(chain("'a'", "|lower", 1000)), "a");
}

// Each expression is bounded, and so is their sum through macro calls.
TEST(JinjaLimits, EvaluationDepthAcrossMacroCallsIsBounded) {
  std::string tall = "f(n - 1)";  // the call at the bottom of a 900-level tree
  for (int i = 0; i < 900; ++i) tall += " ~ ''";
  const std::string source = "{% macro f(n) %}{% if n > 0 %}{{ " + tall + " }}{% endif %}{% endmacro %}{{ f(200) }}";
  const std::string error = error_of(source);
  EXPECT_NE(error.find("statements and expressions nested too deep through macro calls"), std::string::npos) << error;
  // Nested blocks inside a recursive macro count too.
  std::string blocks = "{{ m() }}";
  for (int i = 0; i < 250; ++i) blocks = "{% if true %}" + blocks + "{% endif %}";
  const std::string nested = error_of("{% macro m() %}" + blocks + "{% endmacro %}{{ m() }}");
  EXPECT_NE(nested.find("statements and expressions nested too deep through macro calls"), std::string::npos) << nested;
}

TEST(JinjaLimits, WorkIsBounded) {
  RenderOptions options;
  options.max_statements = 10000;
  auto error = [&](std::string_view source) {
    try {
      Template(source).render(Json::object(), options);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string too_long = "template ran too long: the work of over 10000 statements";
  EXPECT_EQ(error("{% for i in range(1000) %}{% for j in range(100) %}{% endfor %}{% endfor %}"), "template:1:27: " + too_long);
  EXPECT_EQ(error("{% set big = range(100000) %}{% for i in range(100) %}{{ i in big }}{% endfor %}"), "template:1:58: " + too_long);
  EXPECT_EQ(error("{{ range(10000)|unique|list }}"), "template:1:17: " + too_long);
  EXPECT_EQ(error("{% for i in range(100) %}{% set x = 'a' * 1000000 %}{% endfor %}"), "template:1:41: " + too_long);
  EXPECT_EQ(error("{% for i in range(1000) %}{{ i }}{% endfor %}"), "(no error)");
}

// A template can build a chain of lists a million deep, one append at a time (each append
// walks only the new, empty list), within the server's work limit; freeing it used to
// recurse as deep and overflow the stack (docs/results/fuzz_campaign.md).
TEST(JinjaLimits, DeeplyNestedListsAreFreedWithoutRecursion) {
  Value chain = Array{};
  for (int i = 0; i < 1'000'000; ++i) chain = Value(Array{chain});
  chain = Value();
  RenderOptions options;
  options.max_statements = 1'000'000;
  const std::string source =
      "{% set ns = namespace(top=[], cur=none) %}{% set ns.cur = ns.top %}{% for i in range(1000000) %}{% set n = [] %}"
      "{% set _ = ns.cur.append(n) %}{% set ns.cur = n %}{% endfor %}";
  try {
    Template(source).render(Json::object(), options);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("template ran too long"), std::string::npos) << e.what();
  }
}

// -- real chat templates

Json chat() {
  return Json::parse(R"([
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello!"},
    {"role": "assistant", "content": "Hi there. How can I help?"},
    {"role": "user", "content": "What is 2+2?"}])");
}

Json without_system(Json messages) {
  messages.erase(messages.begin());
  return messages;
}

Json with_system(Json messages) {
  messages.insert(messages.begin(), chat()[0]);
  return messages;
}

// The first three turns of chat(), then an assistant answer with reasoning.
Json thinking_chat(const std::string& answer) {
  Json messages = chat();
  messages.erase(messages.end() - 1);
  messages.push_back(Json{{"role", "assistant"}, {"content", answer}});
  return messages;
}

Json r1_chat() {
  Json messages = thinking_chat("<think>hmm</think>4");
  messages.push_back(Json{{"role", "user"}, {"content", "Thanks"}});
  return messages;
}

Json weather_tool() {
  return Json::parse(R"({"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "description": "The city name."},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
      "required": ["city"]}}})");
}

const Json kArguments = Json::parse(R"({"city": "Paris", "unit": "celsius"})");
const Json kArgumentsString = R"({"city": "Paris", "unit": "celsius"})";
const char* const kDeepSeekBos = "<\uff5cbegin\u2581of\u2581sentence\uff5c>";

// A question, a tool call with those arguments (with that content), its result, the
// answer and a last user turn.
Json tool_chat(const Json& arguments, const Json& content) {
  Json messages = Json::array();
  messages.push_back(Json{{"role", "user"}, {"content", "What's the weather in Paris?"}});
  messages.push_back(Json{{"role", "assistant"},
                          {"content", content},
                          {"tool_calls", Json::array({Json{{"id", "call00001"},
                                                           {"type", "function"},
                                                           {"function", Json{{"name", "get_weather"}, {"arguments", arguments}}}}})}});
  messages.push_back(Json{{"role", "tool"}, {"tool_call_id", "call00001"}, {"content", R"({"temperature": 18})"}});
  messages.push_back(Json{{"role", "assistant"}, {"content", "It is 18 degrees in Paris."}});
  messages.push_back(Json{{"role", "user"}, {"content", "Thanks!"}});
  return messages;
}

TEST(JinjaChatTemplates, MistralRejectsRolesThatDoNotAlternate) {
  const Json context{{"messages", Json::parse(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])")},
                     {"bos_token", "<s>"},
                     {"eos_token", "</s>"}};
  EXPECT_THROW(render_file("mistral_nemo", context), RaisedError);
  EXPECT_THROW(render_file("mistral_v0_3", context), RaisedError);
}

TEST(JinjaChatTemplates, GptOssRejectsChannelTagsInContent) {
  const Json context{{"messages", Json::parse(R"([{"role": "user", "content": "hi"},
                                                  {"role": "assistant", "content": "x<|channel|>final<|message|>y"}])")},
                     {"add_generation_prompt", true}};
  EXPECT_THROW(render_file("gpt_oss", context), RaisedError);
}

TEST(JinjaChatTemplates, Qwen3Chat) {
  EXPECT_EQ(render_file("qwen3", Json{{"messages", chat()}, {"add_generation_prompt", true}}),
            R"~(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Hello!<|im_end|>
<|im_start|>assistant
Hi there. How can I help?<|im_end|>
<|im_start|>user
What is 2+2?<|im_end|>
<|im_start|>assistant
)~");
}

TEST(JinjaChatTemplates, Qwen3ToolCall) {
  EXPECT_EQ(render_file("qwen3", Json{{"messages", with_system(tool_chat(kArguments, ""))}, {"tools", Json::array({weather_tool()})}, {"add_generation_prompt", true}}),
            R"~(<|im_start|>system
You are a helpful assistant.

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name."}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
<|im_start|>user
What's the weather in Paris?<|im_end|>
<|im_start|>assistant
<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
{"temperature": 18}
</tool_response><|im_end|>
<|im_start|>assistant
It is 18 degrees in Paris.<|im_end|>
<|im_start|>user
Thanks!<|im_end|>
<|im_start|>assistant
)~");
}

TEST(JinjaChatTemplates, Qwen3KeepsThinkingOfTheLastTurn) {
  EXPECT_EQ(render_file("qwen3", Json{{"messages", thinking_chat("<think>\nI add.\n</think>\n\n4")}}),
            R"~(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Hello!<|im_end|>
<|im_start|>assistant
Hi there. How can I help?<|im_end|>
<|im_start|>assistant
<think>
I add.
</think>

4<|im_end|>
)~");
}

TEST(JinjaChatTemplates, Qwen3ThinkingOff) {
  EXPECT_EQ(render_file("qwen3", Json{{"messages", chat()}, {"add_generation_prompt", true}, {"enable_thinking", false}}),
            R"~(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Hello!<|im_end|>
<|im_start|>assistant
Hi there. How can I help?<|im_end|>
<|im_start|>user
What is 2+2?<|im_end|>
<|im_start|>assistant
<think>

</think>

)~");
}

// Qwen3.6 (and Qwen3.5): the generation prompt opens a <think> block (or, with
// enable_thinking=false, closes an empty one). Assistant turns before the last user query
// lose their reasoning unless preserve_thinking=true; turns after it keep it, read from
// reasoning_content or split out of <think>...</think> in the content.
Json qwen36_chat() {
  Json messages = chat();
  messages[2]["reasoning_content"] = "The user greets me.";
  return messages;
}

TEST(JinjaChatTemplates, Qwen36SystemAndUserOpenThinking) {
  const Json messages = Json::parse(R"([{"role": "system", "content": "You are a helpful assistant."},
                                        {"role": "user", "content": "Hello!"}])");
  EXPECT_EQ(render_file("qwen3_6", Json{{"messages", messages}, {"add_generation_prompt", true}}),
            R"~(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Hello!<|im_end|>
<|im_start|>assistant
<think>
)~");
  EXPECT_EQ(render_file("qwen3_6", Json{{"messages", without_system(messages)}, {"add_generation_prompt", false}}),
            "<|im_start|>user\nHello!<|im_end|>\n");
}

TEST(JinjaChatTemplates, Qwen36DropsEarlierReasoning) {
  const std::string expected = R"~(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Hello!<|im_end|>
<|im_start|>assistant
Hi there. How can I help?<|im_end|>
<|im_start|>user
What is 2+2?<|im_end|>
<|im_start|>assistant
<think>
)~";
  EXPECT_EQ(render_file("qwen3_6", Json{{"messages", qwen36_chat()}, {"add_generation_prompt", true}}), expected);
  // An earlier turn's inline <think> block goes the same way.
  Json inline_thinking = chat();
  inline_thinking[2]["content"] = "<think>\nA greeting.\n</think>\n\nHi there. How can I help?";
  EXPECT_EQ(render_file("qwen3_6", Json{{"messages", inline_thinking}, {"add_generation_prompt", true}}), expected);
  // preserve_thinking must be the boolean true.
  EXPECT_EQ(render_file("qwen3_6", Json{{"messages", qwen36_chat()}, {"add_generation_prompt", true}, {"preserve_thinking", "yes"}}), expected);
}

TEST(JinjaChatTemplates, Qwen36PreserveThinking) {
  EXPECT_EQ(render_file("qwen3_6", Json{{"messages", qwen36_chat()}, {"add_generation_prompt", true}, {"preserve_thinking", true}}),
            R"~(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Hello!<|im_end|>
<|im_start|>assistant
<think>
The user greets me.
</think>

Hi there. How can I help?<|im_end|>
<|im_start|>user
What is 2+2?<|im_end|>
<|im_start|>assistant
<think>
)~");
}

TEST(JinjaChatTemplates, Qwen36ThinkingOff) {
  EXPECT_EQ(render_file("qwen3_6", Json{{"messages", qwen36_chat()}, {"add_generation_prompt", true}, {"enable_thinking", false}}),
            R"~(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Hello!<|im_end|>
<|im_start|>assistant
Hi there. How can I help?<|im_end|>
<|im_start|>user
What is 2+2?<|im_end|>
<|im_start|>assistant
<think>

</think>

)~");
}

TEST(JinjaChatTemplates, Qwen36KeepsReasoningAfterTheLastQuery) {
  Json messages = qwen36_chat();
  messages.push_back(Json{{"role", "assistant"}, {"content", "<think>\nI add two and two.\n</think>\n\n4"}});
  EXPECT_EQ(render_file("qwen3_6", Json{{"messages", messages}}),
            R"~(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Hello!<|im_end|>
<|im_start|>assistant
Hi there. How can I help?<|im_end|>
<|im_start|>user
What is 2+2?<|im_end|>
<|im_start|>assistant
<think>
I add two and two.
</think>

4<|im_end|>
)~");
  // reasoning_content wins over the content's own tags, and is trimmed; no reasoning
  // still gives an (empty) think block.
  messages.back() = Json{{"role", "assistant"}, {"content", "4"}, {"reasoning_content", "\n 2+2=4 \n"}};
  EXPECT_NE(render_file("qwen3_6", Json{{"messages", messages}}).find("<|im_start|>assistant\n<think>\n2+2=4\n</think>\n\n4<|im_end|>\n"), std::string::npos);
  messages.back() = Json{{"role", "assistant"}, {"content", "4"}};
  EXPECT_NE(render_file("qwen3_6", Json{{"messages", messages}}).find("<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>\n"), std::string::npos);
}

const char* const kQwen36Tools = R"~(<|im_start|>system
# Tools

You have access to the following functions:

<tools>
{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name."}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}
</tools>

If you choose to call a function ONLY reply in the following format with NO suffix:

<tool_call>
<function=example_function_name>
<parameter=example_parameter_1>
value_1
</parameter>
<parameter=example_parameter_2>
This is the value for the second parameter
that can span
multiple lines
</parameter>
</function>
</tool_call>

<IMPORTANT>
Reminder:
- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags
- Required parameters MUST be specified
- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after
- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls
</IMPORTANT>)~";

TEST(JinjaChatTemplates, Qwen36ToolCall) {
  EXPECT_EQ(render_file("qwen3_6", Json{{"messages", tool_chat(kArguments, "Let me check.")}, {"tools", Json::array({weather_tool()})}, {"add_generation_prompt", true}}),
            std::string(kQwen36Tools) + R"~(<|im_end|>
<|im_start|>user
What's the weather in Paris?<|im_end|>
<|im_start|>assistant
Let me check.

<tool_call>
<function=get_weather>
<parameter=city>
Paris
</parameter>
<parameter=unit>
celsius
</parameter>
</function>
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
{"temperature": 18}
</tool_response><|im_end|>
<|im_start|>assistant
It is 18 degrees in Paris.<|im_end|>
<|im_start|>user
Thanks!<|im_end|>
<|im_start|>assistant
<think>
)~");
}

// An agent step: the tool result is the latest message, so the call's turn comes after
// the last user query and keeps its reasoning; the system prompt follows the tool list.
TEST(JinjaChatTemplates, Qwen36ToolCallKeepsReasoningMidTask) {
  Json messages = with_system(tool_chat(kArguments, ""));
  messages.erase(messages.begin() + 4, messages.end());
  messages[2]["reasoning_content"] = "I need the weather tool.";
  EXPECT_EQ(render_file("qwen3_6", Json{{"messages", messages}, {"tools", Json::array({weather_tool()})}, {"add_generation_prompt", true}}),
            std::string(kQwen36Tools) + R"~(

You are a helpful assistant.<|im_end|>
<|im_start|>user
What's the weather in Paris?<|im_end|>
<|im_start|>assistant
<think>
I need the weather tool.
</think>

<tool_call>
<function=get_weather>
<parameter=city>
Paris
</parameter>
<parameter=unit>
celsius
</parameter>
</function>
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
{"temperature": 18}
</tool_response><|im_end|>
<|im_start|>assistant
<think>
)~");
}

TEST(JinjaChatTemplates, Qwen36RejectsBadConversations) {
  const Json only_system = Json::parse(R"([{"role": "system", "content": "s"}])");
  EXPECT_THROW(render_file("qwen3_6", Json{{"messages", only_system}}), RaisedError);  // no user query
  EXPECT_THROW(render_file("qwen3_6", Json{{"messages", Json::array()}}), RaisedError);
  Json late_system = chat();
  late_system.push_back(late_system[0]);
  EXPECT_THROW(render_file("qwen3_6", Json{{"messages", late_system}}), RaisedError);
}

// -- ChatTemplate: a model's template as the server and `epq chat` use it

// A GGUF with a tiny tokenizer and no template of its own, written to a temporary file.
class TemplateModel {
 public:
  TemplateModel() : path_(epq::testing::temp_path("chat-template.gguf")) {
    gguf::Writer w(path_);
    w.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
    w.set("tokenizer.ggml.pre", gguf::Value::string("qwen35"));
    w.set("tokenizer.ggml.tokens", gguf::Value::string_array({"a", "<|im_end|>"}));
    w.set("tokenizer.ggml.token_type", gguf::Value::int_array(gguf::ValueType::INT32, {1, 3}));
    w.set("tokenizer.ggml.merges", gguf::Value::string_array({}));
    w.set("tokenizer.ggml.eos_token_id", gguf::Value::integer(gguf::ValueType::UINT32, 1));
    w.begin_data();
    w.finish();
    file_.emplace(gguf::File::open(path_));
    tokenizer_.emplace(Tokenizer::from_gguf(*file_));
  }
  ~TemplateModel() { std::filesystem::remove(path_); }
  ChatTemplate with(const std::string& name) const { return ChatTemplate(*file_, *tokenizer_, template_file(name)); }

 private:
  std::string path_;
  std::optional<gguf::File> file_;
  std::optional<Tokenizer> tokenizer_;
};

// OpenAI clients send a tool call's arguments as JSON text. Templates that print that text
// as it is get it unchanged; those that need an object (Qwen3.6's `arguments|items` fails
// on text; tojson would quote it once more) get the parsed object.
TEST(ChatTemplate, ParsesArgumentTextsOnlyForTemplatesThatNeedObjects) {
  const TemplateModel model;
  const std::vector<std::pair<std::string, bool>> expected = {
      {"qwen3_6", true}, {"qwen3", false}, {"llama3_3", true}, {"llama3_2", true}, {"mistral_v0_3", true},
      {"mistral_nemo", true}, {"mistral_small_3_1", true}, {"deepseek_v3", false}, {"deepseek_r1", false},
      {"deepseek_v3_1", false}, {"gpt_oss", true}};
  for (const auto& [name, wants] : expected) EXPECT_EQ(model.with(name).wants_object_arguments(), wants) << name;

  const ChatTemplate qwen36 = model.with("qwen3_6");
  const std::string with_text = qwen36.render(tool_chat(kArgumentsString, ""), Json::array({weather_tool()}), true);
  EXPECT_EQ(with_text, qwen36.render(tool_chat(kArguments, ""), Json::array({weather_tool()}), true));
  EXPECT_NE(with_text.find("<parameter=city>\nParis\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>"), std::string::npos);
  // Text that is no JSON object stays text (and this template then refuses it).
  EXPECT_THROW(qwen36.render(tool_chat("not json", ""), nullptr, true), Error);

  const ChatTemplate qwen3 = model.with("qwen3");
  EXPECT_NE(qwen3.render(tool_chat(Json(R"({"city":"Paris"})"), ""), nullptr, true).find(R"({"name": "get_weather", "arguments": {"city":"Paris"}})"),
            std::string::npos);
}

TEST(JinjaChatTemplates, Llama33Chat) {
  EXPECT_EQ(render_file("llama3_3", Json{{"messages", chat()}, {"add_generation_prompt", true}, {"bos_token", "<|begin_of_text|>"}}),
            R"~(<|begin_of_text|><|start_header_id|>system<|end_header_id|>

Cutting Knowledge Date: December 2023
Today Date: 26 Jul 2024

You are a helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>

Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Hi there. How can I help?<|eot_id|><|start_header_id|>user<|end_header_id|>

What is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)~");
}

TEST(JinjaChatTemplates, Llama33ToolCall) {
  EXPECT_EQ(render_file("llama3_3", Json{{"messages", with_system(tool_chat(kArguments, ""))}, {"tools", Json::array({weather_tool()})}, {"add_generation_prompt", true}, {"bos_token", "<|begin_of_text|>"}}),
            R"~(<|begin_of_text|><|start_header_id|>system<|end_header_id|>

Environment: ipython
Cutting Knowledge Date: December 2023
Today Date: 26 Jul 2024

You are a helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>

Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.

Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.

{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {
                    "type": "string",
                    "description": "The city name."
                },
                "unit": {
                    "type": "string",
                    "enum": [
                        "celsius",
                        "fahrenheit"
                    ]
                }
            },
            "required": [
                "city"
            ]
        }
    }
}

What's the weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>

"{\"temperature\": 18}"<|eot_id|><|start_header_id|>assistant<|end_header_id|>

It is 18 degrees in Paris.<|eot_id|><|start_header_id|>user<|end_header_id|>

Thanks!<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)~");
}

TEST(JinjaChatTemplates, Llama32DateFromStrftimeNow) {
  EXPECT_EQ(render_file("llama3_2", Json{{"messages", chat()}, {"add_generation_prompt", true}, {"bos_token", "<|begin_of_text|>"}}),
            R"~(<|begin_of_text|><|start_header_id|>system<|end_header_id|>

Cutting Knowledge Date: December 2023
Today Date: 07 Mar 2025

You are a helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>

Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Hi there. How can I help?<|eot_id|><|start_header_id|>user<|end_header_id|>

What is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)~");
}

TEST(JinjaChatTemplates, MistralV03Chat) {
  EXPECT_EQ(render_file("mistral_v0_3", Json{{"messages", chat()}, {"bos_token", "<s>"}, {"eos_token", "</s>"}}),
            R"~(<s>[INST] Hello![/INST] Hi there. How can I help?</s>[INST] You are a helpful assistant.

What is 2+2?[/INST])~");
}

TEST(JinjaChatTemplates, MistralV03ToolCall) {
  EXPECT_EQ(render_file("mistral_v0_3", Json{{"messages", tool_chat(kArgumentsString, "")}, {"tools", Json::array({weather_tool()})}, {"bos_token", "<s>"}, {"eos_token", "</s>"}}),
            R"~(<s>[INST] What's the weather in Paris?[/INST][TOOL_CALLS] [{"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}", "id": "call00001"}]</s>[TOOL_RESULTS] {"content": {"temperature": 18}, "call_id": "call00001"}[/TOOL_RESULTS] It is 18 degrees in Paris.</s>[AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name."}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}][/AVAILABLE_TOOLS][INST] Thanks![/INST])~");
}

TEST(JinjaChatTemplates, MistralNemoChat) {
  EXPECT_EQ(render_file("mistral_nemo", Json{{"messages", chat()}, {"bos_token", "<s>"}, {"eos_token", "</s>"}}),
            R"~(<s>[INST]Hello![/INST]Hi there. How can I help?</s>[INST]You are a helpful assistant.

What is 2+2?[/INST])~");
}

TEST(JinjaChatTemplates, MistralNemoToolCall) {
  EXPECT_EQ(render_file("mistral_nemo", Json{{"messages", with_system(tool_chat(kArgumentsString, ""))}, {"tools", Json::array({weather_tool()})}, {"bos_token", "<s>"}, {"eos_token", "</s>"}}),
            R"~(<s>[INST]What's the weather in Paris?[/INST][TOOL_CALLS][{"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}", "id": "call00001"}]</s>[TOOL_RESULTS]{"content": {"temperature": 18}, "call_id": "call00001"}[/TOOL_RESULTS]It is 18 degrees in Paris.</s>[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name."}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}][/AVAILABLE_TOOLS][INST]You are a helpful assistant.

Thanks![/INST])~");
}

TEST(JinjaChatTemplates, MistralSmall31DefaultSystemPrompt) {
  EXPECT_EQ(render_file("mistral_small_3_1", Json{{"messages", without_system(chat())}, {"bos_token", "<s>"}, {"eos_token", "</s>"}}),
            R"~(<s>[SYSTEM_PROMPT]You are Mistral Small 3, a Large Language Model (LLM) created by Mistral AI, a French startup headquartered in Paris.Your knowledge base was last updated on 2023-10-01. The current date is 2025-03-07.When you're not sure about some information, you say that you don't have the information and don't make up anything.If the user's question is not clear, ambiguous, or does not provide enough context for you to accurately answer the question, you do not try to answer it right away and you rather ask the user to clarify their request (e.g. "What are some good restaurants around me?" => "Where are you?" or "When is the next flight to Tokyo" => "Where do you travel from?")[/SYSTEM_PROMPT][INST]Hello![/INST]Hi there. How can I help?</s>[INST]What is 2+2?[/INST])~");
}

TEST(JinjaChatTemplates, MistralSmall31ToolCall) {
  EXPECT_EQ(render_file("mistral_small_3_1", Json{{"messages", with_system(tool_chat(kArgumentsString, ""))}, {"tools", Json::array({weather_tool()})}, {"bos_token", "<s>"}, {"eos_token", "</s>"}}),
            R"~(<s>[SYSTEM_PROMPT]You are a helpful assistant that can call tools. If you call one or more tools, format them in a single JSON array or objects, where each object is a tool call, not as separate objects outside of an array or multiple arrays. Use the format [{"name": tool call name, "arguments": tool call arguments}, additional tool calls] if you call more than one tool. If you call tools, do not attempt to interpret them or otherwise provide a response until you receive a tool call result that you can interpret for the user.You are a helpful assistant.[/SYSTEM_PROMPT][INST]What's the weather in Paris?[/INST][TOOL_CALLS] [{"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}", "id": "call00001"}]</s>[TOOL_RESULTS] {"content": {"temperature": 18}, "call_id": "call00001"}[/TOOL_RESULTS]It is 18 degrees in Paris.</s>[AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name."}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}][/AVAILABLE_TOOLS][INST]Thanks![/INST])~");
}

TEST(JinjaChatTemplates, DeepSeekV3Chat) {
  EXPECT_EQ(render_file("deepseek_v3", Json{{"messages", chat()}, {"add_generation_prompt", true}, {"bos_token", kDeepSeekBos}}),
            R"~(<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hello!<｜Assistant｜>Hi there. How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2?<｜Assistant｜>)~");
}

TEST(JinjaChatTemplates, DeepSeekV3ToolCall) {
  EXPECT_EQ(render_file("deepseek_v3", Json{{"messages", with_system(tool_chat(kArgumentsString, nullptr))}, {"add_generation_prompt", true}, {"bos_token", kDeepSeekBos}}),
            R"~(<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>What's the weather in Paris?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
```json
{"city": "Paris", "unit": "celsius"}
```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{"temperature": 18}<｜tool▁output▁end｜><｜tool▁outputs▁end｜>It is 18 degrees in Paris.<｜end▁of▁sentence｜><｜User｜>Thanks!<｜Assistant｜>)~");
}

TEST(JinjaChatTemplates, DeepSeekR1DropsThinking) {
  EXPECT_EQ(render_file("deepseek_r1", Json{{"messages", r1_chat()}, {"add_generation_prompt", true}, {"bos_token", kDeepSeekBos}}),
            R"~(<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hello!<｜Assistant｜>Hi there. How can I help?<｜end▁of▁sentence｜><｜Assistant｜>4<｜end▁of▁sentence｜><｜User｜>Thanks<｜Assistant｜><think>
)~");
}

TEST(JinjaChatTemplates, DeepSeekR1ToolCall) {
  EXPECT_EQ(render_file("deepseek_r1", Json{{"messages", with_system(tool_chat(kArgumentsString, nullptr))}, {"add_generation_prompt", true}, {"bos_token", kDeepSeekBos}}),
            R"~(<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>What's the weather in Paris?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
```json
{"city": "Paris", "unit": "celsius"}
```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{"temperature": 18}<｜tool▁output▁end｜><｜tool▁outputs▁end｜>It is 18 degrees in Paris.<｜end▁of▁sentence｜><｜User｜>Thanks!<｜Assistant｜><think>
)~");
}

TEST(JinjaChatTemplates, DeepSeekV31Chat) {
  EXPECT_EQ(render_file("deepseek_v3_1", Json{{"messages", chat()}, {"add_generation_prompt", true}, {"bos_token", kDeepSeekBos}}),
            R"~(<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hello!<｜Assistant｜></think>Hi there. How can I help?<｜end▁of▁sentence｜><｜User｜>What is 2+2?<｜Assistant｜></think>)~");
}

TEST(JinjaChatTemplates, DeepSeekV31ToolCallThinking) {
  EXPECT_EQ(render_file("deepseek_v3_1", Json{{"messages", with_system(tool_chat(kArgumentsString, nullptr))}, {"add_generation_prompt", true}, {"thinking", true}, {"bos_token", kDeepSeekBos}}),
            R"~(<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>What's the weather in Paris?<｜Assistant｜></think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris", "unit": "celsius"}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁output▁begin｜>{"temperature": 18}<｜tool▁output▁end｜>It is 18 degrees in Paris.<｜end▁of▁sentence｜><｜User｜>Thanks!<｜Assistant｜><think>)~");
}

TEST(JinjaChatTemplates, GptOssChat) {
  EXPECT_EQ(render_file("gpt_oss", Json{{"messages", chat()}, {"add_generation_prompt", true}}),
            R"~(<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: 2025-03-07

Reasoning: medium

# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|><|start|>developer<|message|># Instructions

You are a helpful assistant.

<|end|><|start|>user<|message|>Hello!<|end|><|start|>assistant<|channel|>final<|message|>Hi there. How can I help?<|end|><|start|>user<|message|>What is 2+2?<|end|><|start|>assistant)~");
}

TEST(JinjaChatTemplates, GptOssToolCall) {
  EXPECT_EQ(render_file("gpt_oss", Json{{"messages", with_system(tool_chat(kArguments, ""))}, {"tools", Json::array({weather_tool()})}, {"add_generation_prompt", true}, {"reasoning_effort", "high"}}),
            R"~(<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: 2025-03-07

Reasoning: high

# Valid channels: analysis, commentary, final. Channel must be included for every message.
Calls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># Instructions

You are a helpful assistant.

# Tools

## functions

namespace functions {

// Get the current weather in a city.
type get_weather = (_: {
// The city name.
city: string,
unit?: "celsius" | "fahrenheit",
}) => any;

} // namespace functions<|end|><|start|>user<|message|>What's the weather in Paris?<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris", "unit": "celsius"}<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"{\"temperature\": 18}"<|end|><|start|>assistant<|channel|>final<|message|>It is 18 degrees in Paris.<|end|><|start|>user<|message|>Thanks!<|end|><|start|>assistant)~");
}

TEST(JinjaChatTemplates, GptOssBuiltinTools) {
  EXPECT_EQ(render_file("gpt_oss", Json{{"messages", Json::parse(R"([{"role": "user", "content": "hi"}])")}, {"builtin_tools", {"browser", "python"}}, {"add_generation_prompt", true}}),
            R"~(<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: 2025-03-07

Reasoning: medium

# Tools

## browser

// Tool for browsing.
// The `cursor` appears in brackets before each browsing display: `[{cursor}]`.
// Cite information from the tool using the following format:
// `【{cursor}†L{line_start}(-L{line_end})?】`, for example: `【6†L9-L11】` or `【8†L3】`.
// Do not quote more than 10 words directly from the tool output.
// sources=web (default: web)
namespace browser {

// Searches for information related to `query` and displays `topn` results.
type search = (_: {
query: string,
topn?: number, // default: 10
source?: string,
}) => any;

// Opens the link `id` from the page indicated by `cursor` starting at line number `loc`, showing `num_lines` lines.
// Valid link ids are displayed with the formatting: `【{id}†.*】`.
// If `cursor` is not provided, the most recent page is implied.
// If `id` is a string, it is treated as a fully qualified URL associated with `source`.
// If `loc` is not provided, the viewport will be positioned at the beginning of the document or centered on the most relevant passage, if available.
// Use this function without `id` to scroll to a new location of an opened page.
type open = (_: {
id?: number | string, // default: -1
cursor?: number, // default: -1
loc?: number, // default: -1
num_lines?: number, // default: -1
view_source?: boolean, // default: false
source?: string,
}) => any;

// Finds exact matches of `pattern` in the current page, or the page given by `cursor`.
type find = (_: {
pattern: string,
cursor?: number, // default: -1
}) => any;

} // namespace browser

## python

Use this tool to execute Python code in your chain of thought. The code will not be shown to the user. This tool should be used for internal reasoning, but not for code that is intended to be visible to the user (e.g. when creating plots, tables, or files).

When you send a message containing Python code to python, it will be executed in a stateful Jupyter notebook environment. python will respond with the output of the execution or time out after 120.0 seconds. The drive at '/mnt/data' can be used to save and persist user files. Internet access for this session is UNKNOWN. Depends on the cluster.

# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|><|start|>user<|message|>hi<|end|><|start|>assistant)~");
}

}  // namespace
}  // namespace epq::text::jinja
