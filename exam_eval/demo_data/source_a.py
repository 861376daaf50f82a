"""Hand-written demo content, topics 101-105 (see README.md; build.py writes the files).

Each passage carries the label its author gave it when writing it (0-3, TREC DL scale:
3 perfectly relevant, 2 highly relevant, 1 related, 0 irrelevant).
"""

TOPICS = [
    {
        "query_id": "101",
        "text": "how do honey bees make honey",
        "questions": [
            ("What do honey bees collect from flowers to make honey?", ["nectar"]),
            ("Which bees in the colony gather nectar?", ["forager bees", "foragers"]),
            ("Where do bees carry nectar back to the hive?", ["honey stomach", "crop"]),
            ("Which enzyme do bees add to nectar?", ["invertase"]),
            ("How do bees reduce the water content of nectar?", None),
            ("What water content does ripe honey have?", None),
            ("How do bees seal finished honey in the comb?", ["beeswax cap", "wax cappings"]),
            ("Why do bees store honey?", None),
            ("How many flowers must bees visit to make a pound of honey?", None),
            ("What sugars does nectar turn into in honey?", ["glucose and fructose"]),
        ],
        # the nuggets a good answer must hold (the others are "okay"), by position below
        "vital_nuggets": (0, 2, 3),
        "nuggets": [
            "Forager bees collect nectar from flowers.",
            "Nectar is carried in the honey stomach and passed between house bees.",
            "Bees add the enzyme invertase, splitting sucrose into glucose and fructose.",
            "Fanning wings evaporates water until honey holds about 17-18 percent water.",
            "Finished honey is capped with beeswax and eaten by the colony in winter.",
        ],
        "passages": [
            (3, "Honey starts as nectar, a sugary liquid that flowers produce. Forager bees suck it up "
                "with their long tongues and store it in a special honey stomach, or crop, separate from "
                "the stomach they digest food with. Back at the hive they regurgitate the nectar to "
                "younger house bees, who pass it mouth to mouth and add enzymes along the way."),
            (0, "The county spelling bee drew forty-two students this year. After nine rounds the final "
                "two contestants traded words for twenty minutes before a seventh grader won by "
                "correctly spelling 'chiaroscuro'. She will travel to the national competition in May."),
            (2, "A single worker bee makes only about a twelfth of a teaspoon of honey in her life. To "
                "produce one pound of honey, the bees of a colony fly roughly 55,000 miles and visit "
                "around two million flowers, which is why beekeepers leave enough honey in the hive "
                "for the colony to survive the winter."),
            (3, "Inside the hive, house bees add an enzyme called invertase to the nectar. It splits "
                "sucrose into the simpler sugars glucose and fructose. The bees then spread the liquid "
                "thinly across the cells of the comb and fan it with their wings so the water "
                "evaporates, until it holds only about 17 to 18 percent water."),
            (1, "Honey bees live in colonies of a single queen, a few hundred drones and tens of "
                "thousands of female workers. Workers change jobs as they age: they clean cells, feed "
                "larvae, build comb and guard the entrance before finally becoming foragers."),
            (3, "Once the water content is low enough, the honey is ripe and will not ferment. The bees "
                "seal each full cell with a cap of fresh beeswax. The colony stores honey as its food "
                "reserve for cold months and periods when no flowers bloom, eating it to keep the "
                "cluster warm through winter."),
            (0, "Bumblebee is the name of a yellow robot in a popular toy line and film series. The "
                "character transforms into a small car and communicates through fragments of radio "
                "broadcasts because his voice box was damaged."),
            (2, "Beekeepers harvest honey by removing frames whose cells are mostly capped with wax. "
                "An uncapping knife slices off the wax cappings, and a centrifugal extractor spins the "
                "honey out of the comb. Capped cells are a sign the bees judged the honey ripe."),
            (1, "Pollination by bees is worth billions to agriculture. Almonds, apples and blueberries "
                "depend heavily on honey bee colonies that are trucked from farm to farm during the "
                "bloom. Colony losses have worried growers in recent decades."),
            (0, "Bee stings inject a venom containing melittin. Most people feel pain and swelling for "
                "a few hours, but people with an allergy can suffer anaphylaxis and should carry an "
                "epinephrine injector."),
        ],
    },
    {
        "query_id": "102",
        "text": "causes of the french revolution",
        "questions": [
            ("What financial crisis did France face before 1789?", None),
            ("How did France's involvement in the American War of Independence affect its debt?", None),
            ("Which estate paid most of the taxes under the old regime?", ["third estate"]),
            ("What were the three estates of French society?", None),
            ("Which ideas of the Enlightenment inspired revolutionaries?", None),
            ("What happened to bread prices in 1788 and 1789?", None),
            ("Why did Louis XVI call the Estates-General?", None),
            ("What was the Tennis Court Oath?", None),
            ("Which king ruled France when the revolution began?", ["Louis XVI"]),
            ("When was the Bastille stormed?", ["14 July 1789", "July 14, 1789"]),
        ],
        # the nuggets a good answer must hold (the others are "okay"), by position below
        "vital_nuggets": (0, 1, 3),
        "nuggets": [
            "France was nearly bankrupt, partly from funding the American War of Independence.",
            "The Third Estate carried the tax burden while clergy and nobles were largely exempt.",
            "Poor harvests in 1788 pushed bread prices to record levels.",
            "Enlightenment writers challenged absolute monarchy and privilege.",
            "Louis XVI summoned the Estates-General in 1789 to approve new taxes.",
        ],
        "passages": [
            (3, "By the late 1780s the French crown was close to bankruptcy. Decades of war, including "
                "costly support for the American colonists against Britain, had driven the debt so high "
                "that interest payments consumed about half of the royal budget. Attempts by finance "
                "ministers to tax the privileged orders failed."),
            (3, "Society under the old regime was divided into three estates: the clergy, the nobility "
                "and everyone else. The First and Second Estates were largely exempt from direct taxes, "
                "so the Third Estate, peasants, artisans and the growing middle class, paid almost all "
                "of them while holding little political power."),
            (2, "The harvest of 1788 was ruined by drought and hailstorms. By the spring of 1789 the "
                "price of bread in Paris had reached its highest level of the century, and a laborer "
                "could spend most of a day's wage on a single loaf. Hunger fed riots in towns and the "
                "countryside."),
            (0, "French onion soup is made by slowly caramelizing onions in butter, adding beef stock "
                "and a splash of wine, and finishing each bowl with a slice of toasted bread and melted "
                "Gruyere under the grill."),
            (3, "To approve new taxes, Louis XVI summoned the Estates-General in May 1789, the first "
                "time it had met since 1614. Deputies of the Third Estate demanded voting by head "
                "rather than by order. Locked out of their hall, they met on a tennis court and swore "
                "the Tennis Court Oath not to separate until France had a constitution."),
            (2, "Writers of the Enlightenment such as Rousseau, Voltaire and Montesquieu questioned "
                "the divine right of kings and the privileges of the church and nobility. Their ideas "
                "of popular sovereignty, separation of powers and equality before the law spread "
                "through salons, pamphlets and coffee houses."),
            (1, "On 14 July 1789 a crowd stormed the Bastille, a fortress and prison in Paris, looking "
                "for gunpowder. Its fall became the symbol of the revolution, and the date is "
                "celebrated as France's national day."),
            (1, "Napoleon Bonaparte rose to power during the revolutionary wars and crowned himself "
                "emperor in 1804. His civil code reorganized French law and was later adopted in many "
                "countries of Europe and Latin America."),
            (0, "The French Open is a tennis tournament played on red clay at Roland Garros in Paris "
                "each spring. Clay slows the ball and produces a high bounce, which favors patient "
                "baseline players."),
            (0, "The Industrial Revolution began in Britain in the eighteenth century with mechanized "
                "textile production, steam engines and the factory system, and later spread to "
                "Belgium, Germany and the United States."),
        ],
    },
    {
        "query_id": "103",
        "text": "what is photosynthesis",
        "questions": [
            ("What is photosynthesis?", None),
            ("Which organisms carry out photosynthesis?", None),
            ("Which pigment absorbs light in plants?", ["chlorophyll"]),
            ("In which organelle does photosynthesis take place?", ["chloroplast"]),
            ("What are the raw materials of photosynthesis?", ["carbon dioxide and water"]),
            ("What gas is released as a by-product of photosynthesis?", ["oxygen"]),
            ("What sugar does photosynthesis produce?", ["glucose"]),
            ("What happens in the light-dependent reactions?", None),
            ("What is the Calvin cycle?", None),
            ("Why is photosynthesis important for life on Earth?", None),
        ],
        # the nuggets a good answer must hold (the others are "okay"), by position below
        "vital_nuggets": (0, 1),
        "nuggets": [
            "Photosynthesis converts light energy into chemical energy stored in sugar.",
            "Carbon dioxide and water are turned into glucose and oxygen.",
            "Chlorophyll in chloroplasts absorbs the light.",
            "Light-dependent reactions split water and make ATP and NADPH.",
            "The Calvin cycle fixes carbon dioxide into sugars.",
        ],
        "passages": [
            (3, "Photosynthesis is the process by which plants, algae and some bacteria use the energy "
                "of sunlight to turn carbon dioxide and water into glucose, releasing oxygen as a "
                "by-product. The overall reaction is 6 CO2 + 6 H2O + light -> C6H12O6 + 6 O2."),
            (3, "In plants, photosynthesis takes place in chloroplasts, organelles packed with the green "
                "pigment chlorophyll. Chlorophyll absorbs mostly red and blue light and reflects green, "
                "which is why leaves look green."),
            (2, "The light-dependent reactions happen in the thylakoid membranes. Absorbed light energy "
                "splits water molecules, releasing oxygen, and is used to make the energy carriers ATP "
                "and NADPH."),
            (2, "In the Calvin cycle, which runs in the stroma of the chloroplast, the enzyme RuBisCO "
                "fixes carbon dioxide from the air. Using ATP and NADPH from the light reactions, the "
                "cycle builds three-carbon sugars that the plant turns into glucose and starch."),
            (3, "Nearly all life depends on photosynthesis. It produces the oxygen in the air we "
                "breathe and the organic matter at the base of food chains, and the fossil fuels we "
                "burn are the remains of ancient photosynthetic organisms."),
            (1, "Cellular respiration is the process cells use to release energy from glucose. In the "
                "mitochondria, glucose is broken down with oxygen into carbon dioxide and water, "
                "producing ATP."),
            (0, "Photography began in the 1820s when Nicephore Niepce captured a view from his window "
                "on a pewter plate coated with bitumen. The exposure took several hours."),
            (1, "Plants need nitrogen, phosphorus and potassium from the soil. Gardeners supply them "
                "with fertilizers labeled with an N-P-K ratio, such as 10-10-10 for a balanced feed."),
            (0, "Solar panels convert sunlight directly into electricity using semiconductor cells "
                "made of silicon. A typical rooftop panel converts about 20 percent of the incoming "
                "light into electric power."),
            (0, "Photosynthesis Records was an independent music label founded in 1998 that released "
                "ambient and electronic albums on limited-edition vinyl."),
        ],
    },
    {
        "query_id": "104",
        "text": "how to treat a sprained ankle",
        "questions": [
            ("What is a sprained ankle?", None),
            ("What does the RICE method stand for?", ["rest, ice, compression and elevation"]),
            ("How long should ice be applied to a sprained ankle?", ["15 to 20 minutes"]),
            ("Why should the ankle be elevated?", None),
            ("Which pain relievers help with a sprained ankle?", None),
            ("When should you see a doctor for a sprained ankle?", None),
            ("How long does a sprained ankle take to heal?", None),
            ("What exercises help recovery after an ankle sprain?", None),
            ("What are the symptoms of a sprained ankle?", None),
            ("How can ankle sprains be prevented?", None),
        ],
        # the nuggets a good answer must hold (the others are "okay"), by position below
        "vital_nuggets": (1, 3),
        "nuggets": [
            "A sprain is a stretched or torn ligament, usually on the outside of the ankle.",
            "Rest, ice, compression and elevation reduce swelling in the first days.",
            "Ice for 15 to 20 minutes at a time, several times a day.",
            "See a doctor if you cannot bear weight or the pain is severe.",
            "Balance and strengthening exercises speed recovery and prevent new sprains.",
        ],
        "passages": [
            (3, "A sprained ankle happens when the ligaments that hold the ankle bones together are "
                "stretched or torn, most often when the foot rolls inward. Typical symptoms are pain, "
                "swelling, bruising and difficulty putting weight on the foot."),
            (3, "For the first 48 to 72 hours, follow RICE (rest, ice, compression and elevation): "
                "rest the ankle, ice it for 15 to 20 minutes every two to three hours, wrap it with an elastic compression bandage, and elevate it "
                "above the level of your heart to let fluid drain and reduce swelling."),
            (2, "Over-the-counter pain relievers such as ibuprofen or naproxen ease pain and swelling; "
                "paracetamol helps with pain. See a doctor if you cannot walk four steps, the pain is "
                "over the bone, or the ankle looks deformed, since it may be broken."),
            (3, "Mild sprains usually heal in two to four weeks, while severe ones can take several "
                "months. Once the pain allows, start gentle range-of-motion exercises such as tracing "
                "the alphabet with your toes, then balance training on one leg and calf raises to "
                "rebuild strength."),
            (2, "Many ankle sprains can be prevented by warming up before sport, wearing shoes that "
                "support the ankle, and doing balance exercises. Athletes with earlier sprains often "
                "use tape or a lace-up brace."),
            (1, "Achilles tendinitis is inflammation of the tendon that connects the calf muscles to "
                "the heel bone. It is common in runners who suddenly increase their mileage and "
                "causes pain at the back of the heel."),
            (1, "A fracture of the fibula near the ankle can look like a bad sprain. Doctors use the "
                "Ottawa ankle rules to decide whether an X-ray is needed after an ankle injury."),
            (0, "An ankle monitor is an electronic device worn by people on house arrest or parole. "
                "It reports the wearer's location to a monitoring center using GPS or a radio base "
                "station."),
            (0, "Ankle boots were fashionable again this autumn, with chunky soles and block heels "
                "leading the season's collections in suede and leather."),
            (0, "Carpal tunnel syndrome causes numbness and tingling in the thumb and fingers when the "
                "median nerve is squeezed at the wrist, often by repetitive hand movements."),
        ],
    },
    {
        "query_id": "105",
        "text": "how does a heat pump work",
        "questions": [
            ("What does a heat pump do?", None),
            ("What is the role of the refrigerant in a heat pump?", None),
            ("What does the compressor do in a heat pump?", None),
            ("How does a heat pump extract heat from cold outdoor air?", None),
            ("What is the coefficient of performance of a heat pump?", None),
            ("How can a heat pump also cool a house?", ["reversing valve"]),
            ("What is the difference between air-source and ground-source heat pumps?", None),
            ("Why is a heat pump more efficient than an electric resistance heater?", None),
            ("What happens to heat pump efficiency in very cold weather?", None),
            ("What is the evaporator in a heat pump?", None),
        ],
        # the nuggets a good answer must hold (the others are "okay"), by position below
        "vital_nuggets": (0, 1, 2),
        "nuggets": [
            "A heat pump moves heat from a cold place to a warm place instead of generating it.",
            "A refrigerant evaporates outdoors, absorbing heat, and condenses indoors, releasing it.",
            "The compressor raises the refrigerant's pressure and temperature.",
            "Heat pumps deliver 2-4 units of heat per unit of electricity (COP).",
            "A reversing valve lets the same unit cool the house in summer.",
        ],
        "passages": [
            (3, "A heat pump does not create heat; it moves it. Using electricity, it takes heat from "
                "outdoor air, the ground or water and pumps it into the house, much as a refrigerator "
                "pumps heat out of its interior into the kitchen."),
            (3, "The refrigerant circulates in a closed loop. In the outdoor coil, the evaporator, the "
                "cold low-pressure refrigerant boils and absorbs heat even from air below freezing. "
                "The compressor squeezes the vapor, raising its pressure and temperature, and in the "
                "indoor coil it condenses and releases that heat into the home."),
            (2, "Because it moves heat rather than converting electricity into heat, a heat pump "
                "delivers two to four kilowatt-hours of heat per kilowatt-hour of electricity. This "
                "ratio is the coefficient of performance; a resistance heater has a COP of 1."),
            (2, "A reversing valve changes the direction of refrigerant flow, so in summer the indoor "
                "coil becomes the evaporator and the unit works as an air conditioner, carrying heat "
                "out of the house."),
            (2, "Air-source heat pumps take heat from outside air and are cheaper to install. "
                "Ground-source or geothermal heat pumps circulate fluid through buried pipes where the "
                "temperature stays stable all year, giving higher efficiency at a higher installation "
                "cost. As the outdoor air gets colder, an air-source unit's efficiency falls."),
            (1, "Many countries subsidize the replacement of oil and gas boilers. Grants and tax "
                "credits can cover a large share of the cost of new heating systems and home "
                "insulation."),
            (1, "Good insulation and airtight windows reduce the heat a house loses, so a smaller "
                "heating system can keep it warm. Loft insulation is one of the cheapest upgrades."),
            (0, "A sump pump sits in a pit in the basement and pumps out groundwater that collects "
                "there, preventing flooding after heavy rain."),
            (0, "A heat wave is a period of unusually hot weather lasting several days. Health "
                "services advise people to drink water, stay in the shade and check on elderly "
                "neighbours."),
            (0, "Insulin pumps deliver small doses of insulin through a thin tube under the skin, "
                "replacing multiple daily injections for many people with type 1 diabetes."),
        ],
    },
]
