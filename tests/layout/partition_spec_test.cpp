#include "reshard/layout/partition_spec.h"

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"
#include "reshard/layout/mesh.h"

namespace reshard {
namespace {

using Entries = std::vector<SpecEntry>;

Entries parsed(std::string_view text) { return PartitionSpec::parse(text).entries(); }

TEST(PartitionSpec, ParsesTheShortSyntax) {
  EXPECT_EQ(parsed("None,data,(a,b)"), (Entries{{}, {"data"}, {"a", "b"}}));
  EXPECT_EQ(parsed("_,data"), (Entries{{}, {"data"}}));
  EXPECT_EQ(parsed("data"), (Entries{{"data"}}));
  EXPECT_EQ(parsed("None"), (Entries{{}}));
  EXPECT_EQ(parsed(" None , data , ( a , b ) "), (Entries{{}, {"data"}, {"a", "b"}}));
  EXPECT_EQ(parsed("(replica,data),None"), (Entries{{"replica", "data"}, {}}));
  EXPECT_EQ(parsed("model-1,x.y"), (Entries{{"model-1"}, {"x.y"}}));
}

TEST(PartitionSpec, ParsesJaxsPrintedForm) {
  EXPECT_EQ(parsed("P('data', None)"), (Entries{{"data"}, {}}));
  EXPECT_EQ(parsed("PartitionSpec(('data','model'),)"), (Entries{{"data", "model"}}));
  EXPECT_EQ(parsed("PartitionSpec(('data', 'model'), None, 'x')"), (Entries{{"data", "model"}, {}, {"x"}}));
  EXPECT_EQ(parsed("P(\"data\", None)"), (Entries{{"data"}, {}}));
  EXPECT_EQ(parsed("P('x',)"), (Entries{{"x"}}));
  EXPECT_EQ(parsed("  P( 'x' , ( 'a' , 'b' ) )  "), (Entries{{"x"}, {"a", "b"}}));
  EXPECT_EQ(parsed("P(None,)"), (Entries{{}}));
}

TEST(PartitionSpec, EmptySpecsAreFullyReplicated) {
  for (std::string_view text : {"", "   ", "P()", "PartitionSpec()", "P( )"}) {
    EXPECT_TRUE(parsed(text).empty()) << "'" << text << "'";
  }
}

TEST(PartitionSpec, NormalisesTuples) {
  // An empty tuple is None, a one-element tuple is that axis.
  EXPECT_EQ(parsed("()"), (Entries{{}}));
  EXPECT_EQ(parsed("(a,)"), (Entries{{"a"}}));
  EXPECT_EQ(parsed("(a)"), (Entries{{"a"}}));
  EXPECT_EQ(parsed("P((), ('x',))"), (Entries{{}, {"x"}}));
  EXPECT_EQ(PartitionSpec::parse("P(('x',),)").to_string(), "PartitionSpec('x',)");
  EXPECT_EQ(PartitionSpec::parse("P((),)").to_string(), "PartitionSpec(None,)");
}

TEST(PartitionSpec, PrintsJaxsRepr) {
  EXPECT_EQ(PartitionSpec().to_string(), "PartitionSpec()");
  EXPECT_EQ(PartitionSpec::parse("x").to_string(), "PartitionSpec('x',)");
  EXPECT_EQ(PartitionSpec::parse("None,data").to_string(), "PartitionSpec(None, 'data')");
  EXPECT_EQ(PartitionSpec::parse("(a,b)").to_string(), "PartitionSpec(('a', 'b'),)");
  EXPECT_EQ(PartitionSpec::parse("(a,b),None,c").to_string(), "PartitionSpec(('a', 'b'), None, 'c')");
  EXPECT_EQ(PartitionSpec::parse("None").to_string(), "PartitionSpec(None,)");
}

TEST(PartitionSpec, ReprParsesBackToTheSameSpec) {
  for (std::string_view text : {"", "x", "None", "None,data", "(a,b)", "(a,b),None,c", "_,_,(x,y,z)"}) {
    const PartitionSpec spec = PartitionSpec::parse(text);
    EXPECT_EQ(PartitionSpec::parse(spec.to_string()).entries(), spec.entries()) << spec.to_string();
  }
}

TEST(PartitionSpec, EqualityIgnoresTrailingNones) {
  EXPECT_EQ(PartitionSpec::parse("x"), PartitionSpec::parse("x,None,None"));
  EXPECT_EQ(PartitionSpec(), PartitionSpec::parse("None"));
  EXPECT_NE(PartitionSpec::parse("x"), PartitionSpec::parse("None,x"));
  EXPECT_NE(PartitionSpec::parse("(x,y)"), PartitionSpec::parse("(y,x)"));  // order is significance
}

TEST(PartitionSpec, AxisNamesInOrder) {
  EXPECT_EQ(PartitionSpec::parse("None,(b,a),c").axis_names(), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_TRUE(PartitionSpec().axis_names().empty());
}

TEST(PartitionSpec, NestedTuplesAreTypedErrors) {
  for (std::string_view text : {"((a,b),c)", "P((('a','b'),),)", "(a,(b,c))", "None,((a))"}) {
    EXPECT_TRUE(testing::throws_error([&] { PartitionSpec::parse(text); }, ErrorCode::kNestedTuple, {text}))
        << text;
  }
}

TEST(PartitionSpec, MalformedTextIsAParseErrorNamingTheSpec) {
  for (std::string_view text : {"P('x'", "P('x)", "data;model", "(a,b", "a,,b", ",a", "P(,)", "(a,None)",
                                "P('')", "a b", "P('x'))", "x)", "data,", "P(x y)", "PartitionSpec('x'"}) {
    EXPECT_TRUE(testing::throws_error([&] { PartitionSpec::parse(text); }, ErrorCode::kParse,
                                      {"partition spec", text}))
        << text;
  }
}

class SpecValidation : public ::testing::Test {
 protected:
  const Mesh mesh_ = Mesh::with_default_order({{"x", 4}, {"y", 2}});
  void validate(std::string_view text, size_t rank) const { PartitionSpec::parse(text).validate(mesh_, rank); }
};

TEST_F(SpecValidation, AcceptsValidSpecs) {
  EXPECT_NO_THROW(validate("", 0));  // P() on a scalar
  EXPECT_NO_THROW(validate("x,y", 2));
  EXPECT_NO_THROW(validate("(x,y)", 1));
  EXPECT_NO_THROW(validate("None,y", 3));  // missing trailing entries mean None
}

TEST_F(SpecValidation, DuplicateAxisInOneDimension) {
  EXPECT_TRUE(testing::throws_error([&] { validate("(x,x)", 2); }, ErrorCode::kDuplicateAxis,
                                    {"PartitionSpec(('x', 'x'),)", "`x`"}));
}

TEST_F(SpecValidation, DuplicateAxisAcrossDimensions) {
  EXPECT_TRUE(testing::throws_error([&] { validate("x,x", 2); }, ErrorCode::kDuplicateAxis,
                                    {"PartitionSpec('x', 'x')", "`x`"}));
  EXPECT_TRUE(testing::throws_error([&] { validate("(x,y),y", 2); }, ErrorCode::kDuplicateAxis,
                                    {"PartitionSpec(('x', 'y'), 'y')", "`y`"}));
}

TEST_F(SpecValidation, UnknownAxisNamesTheAxisAndTheMesh) {
  EXPECT_TRUE(testing::throws_error([&] { validate("z", 1); }, ErrorCode::kUnknownAxis,
                                    {"'z'", "PartitionSpec('z',)", "'x', 'y'"}));
  EXPECT_TRUE(testing::throws_error([&] { validate("(x,q)", 1); }, ErrorCode::kUnknownAxis, {"'q'"}));
}

TEST_F(SpecValidation, SpecLongerThanRank) {
  EXPECT_TRUE(testing::throws_error([&] { validate("x,y", 1); }, ErrorCode::kRank,
                                    {"PartitionSpec('x', 'y')", "2", "rank 1"}));
  // A scalar takes only P(): even a lone None is one entry too many.
  EXPECT_TRUE(testing::throws_error([&] { validate("x", 0); }, ErrorCode::kRank, {"rank 0"}));
  EXPECT_TRUE(testing::throws_error([&] { validate("None", 0); }, ErrorCode::kRank, {"PartitionSpec(None,)"}));
}

TEST_F(SpecValidation, ChecksInJaxsOrder) {
  // A repeated unknown axis is reported as repeated; an unknown axis before the rank.
  EXPECT_TRUE(testing::throws_error([&] { validate("z,z", 2); }, ErrorCode::kDuplicateAxis));
  EXPECT_TRUE(testing::throws_error([&] { validate("z,x", 1); }, ErrorCode::kUnknownAxis));
}

}  // namespace
}  // namespace reshard
